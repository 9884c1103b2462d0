#!/usr/bin/env python3
"""checklint.py - the suite's own checks read for three ways a check can
pass when the behaviour it names is absent; prints each finding as
FILE:LINE: what, and exits 1 when there is one.

  1. ">=" in an assertion whose own message says "exactly": a count the
     name pins, accepted at any size above.
  2. "in (" a tuple of HTTP status codes: an either-or answer where the
     code gives one.  Where two answers are both right (a race decides,
     a server differs), a comment "# either-or: WHY" on that line or in
     the comment just above says so, and each branch is checked after it.  ("not
     in (...)", which collects the unexpected answers, and "for x in
     (...)" are not either-or answers.)
  3. "X = wait_for(...)" then "len(X)" within the next lines with no
     settled state awaited between (a delivery row, "settled"):
     wait_for returns at the first arrival, so the count cannot see a
     second one.

Usage: checklint.py [DIR]   (default: the tests/ folder this file is in)
Standard library only.
"""

import os
import re
import sys

STATUS_TUPLE = re.compile(r"\bin \(\s*[1-5]\d\d\s*(,\s*[1-5]\d\d\s*)+\)")
ASSERT_START = re.compile(r"\b(ok|t\.expect|self\.expect|expect)\(")
WAIT_ASSIGN = re.compile(r"^\s*(\w+)\s*=\s*(\w+\.)?wait_for\(")
SETTLED = re.compile(r"settled|delivered_at|state\b|\.delivery\(")
WINDOW = 8      # lines after a wait_for that count as "then"


def call_text(lines, i):
    """The text of the call opening on line i, to its closing paren."""
    depth, out = 0, []
    for line in lines[i:i + 20]:
        out.append(line)
        code = re.sub(r'"[^"]*"|\'[^\']*\'', '""', line)
        depth += code.count("(") - code.count(")")
        if depth <= 0:
            break
    return "\n".join(out)


def comment_above(lines, i):
    """The comment lines just above line i, as one string."""
    out = []
    j = i - 1
    while j >= 0 and lines[j].lstrip().startswith("#"):
        out.append(lines[j])
        j -= 1
    return " ".join(out)


def check_file(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    for i, line in enumerate(lines):
        m = STATUS_TUPLE.search(line)
        if m and not re.search(r"(\bnot|\bfor\s+[\w, ()]+)\s+$",
                               line[:m.start()]) and \
                "either-or:" not in line + comment_above(lines, i):
            found.append((i + 1, "status codes 'in (...)': pin the one "
                          "the code gives, or say '# either-or: why'"))
        if ASSERT_START.search(line):
            text = call_text(lines, i)
            strings = " ".join(re.findall(r'"([^"]*)"', text))
            code = re.sub(r'"[^"]*"', '""', text)
            if "exactly" in strings.lower() and ">=" in code:
                found.append((i + 1, "'>=' in a check that says "
                              "'exactly'"))
        m = WAIT_ASSIGN.match(line)
        if m:
            var = m.group(1)
            for j in range(i + 1, min(i + 1 + WINDOW, len(lines))):
                if SETTLED.search(lines[j]):
                    break
                if re.search(r"\blen\(%s\)" % re.escape(var), lines[j]):
                    found.append((j + 1, "len(%s) after wait_for with no "
                                  "settled state awaited: a second "
                                  "arrival is not seen" % var))
                    break
    return found


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.dirname(os.path.abspath(__file__))
    me = os.path.abspath(__file__)
    n = 0
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in ("node_modules",
                                                      "__pycache__"))
        for name in sorted(files):
            path = os.path.join(root, name)
            if not name.endswith(".py") or os.path.abspath(path) == me:
                continue
            for line, what in check_file(path):
                print("%s:%d: %s" % (os.path.relpath(path, top), line, what))
                n += 1
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
