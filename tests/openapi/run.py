#!/usr/bin/env python3
"""run.py - /openapi.json as a generator uses it: a payments.fcgi of its
own (with an acquirer configured, so that POST /v1/payments can answer
402, and [openapi] server_url) serves the document; `redocly lint` with
the recommended ruleset must report 0 errors and 0 warnings on it, and on
the document served with the shipped conf/payments.ini (its conninfo
aside: no server_url, so servers is "/", and the license it ships);
openapi-typescript generates the types and `tsc --strict` must accept
client.ts (create a payment, read its id, list with limit, handle a 402,
register a webhook endpoint, read a payment.succeeded event as the
document's webhooks describe it) and refuse client_bad.ts.  The tools are tests/openapi/node_modules'
(npm ci from package-lock.json, by tests/lib/deps.sh).  Its own database
in the suite's cluster.  Prints TAP.
Usage: run.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "direct"))
from direct import remove_tmp, run_main, App, Db, conf_text, done, missing, check, write  # noqa: E402

# @redocly/cli 2.77 wants Node.js 20.19 or later (Debian 12's is 18).
NODE_MIN = (20, 19)
SERVER_URL = "https://payments.example.net"
LICENSE = "MIT"
TOOLS = ("redocly", "openapi-typescript", "tsc")


def node_version():
    """node's (major, minor), or None."""
    try:
        out = subprocess.run(["node", "--version"], capture_output=True,
                             text=True, timeout=30).stdout
    except OSError:
        return None
    m = re.match(r"v(\d+)\.(\d+)", out.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def fetch_document(app):
    status, raw = app.request("", "GET", "/openapi.json")
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"Status: 200" not in head and not status.startswith("Status: 200"):
        return None, "GET /openapi.json: %s" % head[:200]
    try:
        return json.loads(body), None
    except ValueError as e:
        return None, "not JSON: %s" % e


def lint(bindir, here, doc):
    """redocly lint's (errors, warnings, its output)."""
    p = subprocess.run([os.path.join(bindir, "redocly"), "lint",
                        "--config", os.path.join(here, "redocly.yaml"),
                        "--format", "json", doc],
                       capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, REDOCLY_TELEMETRY="off",
                                REDOCLY_SUPPRESS_UPDATE_NOTICE="true"))
    try:
        totals = json.loads(p.stdout)["totals"]
        return totals["errors"], totals["warnings"], p.stdout + p.stderr
    except (ValueError, KeyError, TypeError):
        return None, None, "exit %d: %s%s" % (p.returncode, p.stdout,
                                               p.stderr)


def shipped_config(srcdir, conninfo):
    """conf/payments.ini as shipped, but for its [database] conninfo."""
    with open(os.path.join(srcdir, "conf", "payments.ini")) as f:
        text = f.read()
    text, n = re.subn(r"(?m)^conninfo = .*$", "conninfo = " + conninfo,
                      text)
    return text if n == 1 else None


def served(builddir, conf, tmp, name):
    """The document payments.fcgi serves with conf: (doc, why)."""
    app = App(builddir, conf, os.path.join(tmp, name + ".sock"),
              os.path.join(tmp, name + ".log"))
    try:
        return fetch_document(app)
    finally:
        app.stop()


def tsc(bindir, work, script):
    """tsc --noEmit --strict on script (in work, next to api.d.ts)."""
    conf = os.path.join(work, "tsconfig.%s.json" % script)
    write(conf, '{ "extends": "./tsconfig.json", "files": ["%s"] }\n'
          % script)
    p = subprocess.run([os.path.join(bindir, "tsc"), "--noEmit", "--strict",
                        "-p", conf], cwd=work, capture_output=True,
                       text=True, timeout=240)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    for a in ("--builddir", "--srcdir", "--pghost", "--pgport"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    here = os.path.join(os.path.abspath(args.srcdir), "tests", "openapi")
    bindir = os.path.join(here, "node_modules", ".bin")
    absent = [t for t in TOOLS
              if not os.access(os.path.join(bindir, t), os.X_OK)]
    node = node_version()
    why = None
    if absent:
        why = "%s not installed in tests/openapi/node_modules (npm ci " \
              "there: tests/lib/deps.sh)" % ", ".join(absent)
    elif node is None or node < NODE_MIN:
        why = "Node.js %s: redocly needs %d.%d or later" % (
            ".".join(map(str, node)) if node else "not found", *NODE_MIN)
    if why is not None:
        missing("redocly lint of /openapi.json", why)
        missing("a TypeScript client of /openapi.json type-checks", why)
        return done()

    tmp = tempfile.mkdtemp(prefix="idem-openapi-")
    db = Db(args.pghost, args.pgport, "postgres")
    db.sql("DROP DATABASE IF EXISTS idem_openapi")
    db.sql("CREATE DATABASE idem_openapi")
    conf = os.path.join(tmp, "app.ini")
    # The acquirer is never called: no payment is created here.
    write(conf, conf_text(args.pghost, args.pgport, "idem_openapi",
                          "[openapi]\nserver_url = %s\nlicense = %s\n"
                          "[payments]\nacquirer_url = http://127.0.0.1:9/\n"
                          % (SERVER_URL, LICENSE)))
    subprocess.run([os.path.join(args.builddir, "apps/idemctl/idemctl"),
                    "-c", conf, "migrate", "--dir",
                    os.path.join(args.srcdir, "sql"), "--dir",
                    os.path.join(args.srcdir, "apps", "payments", "sql")],
                   check=True, stdout=subprocess.DEVNULL)
    # The configuration the sample ships, as a newcomer runs it.
    shipped = shipped_config(args.srcdir, "host=%s port=%s dbname=idem_openapi "
                             "user=postgres" % (args.pghost, args.pgport))
    check.expect(shipped is not None, "conf/payments.ini has one conninfo line")
    write(os.path.join(tmp, "shipped.ini"), shipped)
    sdoc, why = served(args.builddir, os.path.join(tmp, "shipped.ini"),
                       tmp, "shipped")
    check.expect(sdoc is not None, "GET /openapi.json of the sample with its "
                 "shipped conf/payments.ini", why)
    check.expect(sdoc.get("servers") == [{"url": "/"}] and
                 "license" in sdoc["info"], "shipped: servers \"/\" (none "
                 "configured) and the shipped license",
                 (sdoc.get("servers"), sdoc["info"].get("license")))
    write(os.path.join(tmp, "shipped.json"), json.dumps(sdoc))
    errors, warnings, out = lint(bindir, here,
                                 os.path.join(tmp, "shipped.json"))
    check.expect(errors == 0 and warnings == 0,
                 "redocly lint (recommended rules) of the shipped "
                 "configuration's document: %s errors, %s warnings"
                 % (errors, warnings), out)
    doc, why = served(args.builddir, conf, tmp, "app")
    check.expect(doc is not None, "GET /openapi.json of the sample", why)
    check.expect(doc.get("servers") == [{"url": SERVER_URL}],
                 "servers: the configured [openapi] server_url", doc.get("servers"))
    check.expect(doc["info"].get("license") == {"name": LICENSE, "identifier": LICENSE},
                 "info.license: the configured [openapi] license", doc["info"])
    path = os.path.join(tmp, "openapi.json")
    write(path, json.dumps(doc, indent=1))

    errors, warnings, out = lint(bindir, here, path)
    check.expect(errors == 0 and warnings == 0,
                 "redocly lint (recommended rules): %s errors, %s warnings"
                 % (errors, warnings), out)

    work = os.path.join(tmp, "ts")
    os.makedirs(work)
    os.symlink(os.path.join(here, "node_modules"),
               os.path.join(work, "node_modules"))
    for f in ("client.ts", "client_bad.ts", "tsconfig.json"):
        shutil.copy(os.path.join(here, f), work)
    p = subprocess.run([os.path.join(bindir, "openapi-typescript"), path,
                        "-o", os.path.join(work, "api.d.ts")],
                       capture_output=True, text=True, timeout=240)
    check.expect(p.returncode == 0, "openapi-typescript generates the types",
                 p.stdout + p.stderr)
    rc, out = tsc(bindir, work, "client.ts")
    check.expect(rc == 0, "tsc --strict accepts client.ts (create a payment, "
                 "read its id, list with limit, handle a 402, register a webhook "
                 "endpoint, read a payment.succeeded event)", out)
    # The check can fail: each wrong use is refused.
    rc, out = tsc(bindir, work, "client_bad.ts")
    for what, code in (("an undeclared member", "'identifier'"),
                       ("an undeclared query parameter", "'size'"),
                       ("an undeclared problem type",
                        "/problems/no-such-type"),
                       ("an event type not declared",
                        "\"payment.refunded\"")):
        check.expect(rc != 0 and code in out,
                     "tsc refuses client_bad.ts: %s (%s)" % (what, code), out)
    remove_tmp(tmp)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
