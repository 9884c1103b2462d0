"""harness.py - the small test framework of the integration suite.

A scenario module registers checks with @check("name"); run.py runs them in
order against one server fixture and prints TAP:

    ok 1 - [lighttpd] replay is byte-identical
    not ok 2 - [lighttpd] ...
    #   diagnostics
    ok 3 - [lighttpd] ... # SKIP reason
    1..3

Each check is one test.  A check fails by raising Failed (t.fail / t.expect*),
is skipped by raising Skipped (t.skip), and passes by returning.  Any other
exception is a failure too, with its traceback as diagnostics.

Standard library only.
"""

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import traceback


CHECKS = []


class Failed(Exception):
    pass


class Skipped(Exception):
    pass


def check(name, needs=()):
    """Register fn(t) as a check.  needs: capabilities (see Env.has)."""
    def deco(fn):
        CHECKS.append((name, fn, tuple(needs)))
        return fn
    return deco


def q(value):
    """A SQL string literal (standard_conforming_strings is on)."""
    s = str(value)
    if "\x00" in s:
        raise ValueError("NUL in SQL literal")
    return "'" + s.replace("'", "''") + "'"


class DB:
    """psql against the private cluster (conninfo string)."""

    def __init__(self, conninfo):
        self.conninfo = conninfo

    def run(self, sql):
        p = subprocess.run(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
             "-d", self.conninfo, "-f", "-"],
            input=sql.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=60)
        if p.returncode != 0:
            raise Failed("psql failed: %s\n  sql: %s"
                         % (p.stderr.decode(errors="replace").strip(), sql))
        return p.stdout.decode()

    def scalar(self, sql):
        out = self.run(sql)
        return out[:-1] if out.endswith("\n") else out

    def int(self, sql):
        return int(self.scalar(sql))

    def rows(self, sql):
        """Rows of a SELECT as a list of dicts (through json_agg)."""
        out = self.scalar("select coalesce(json_agg(x), '[]') from (%s) x"
                          % sql)
        return json.loads(out)

    def before_insert(self, name, table, when, action):
        """Create a BEFORE INSERT trigger on table running action (PL/pgSQL)
        for rows where when holds; returns the SQL that drops it."""
        fn = "idem_test_" + name
        self.run("create function %s() returns trigger language plpgsql "
                 "as $$ begin if %s then %s; end if; return new; end $$; "
                 "create trigger %s before insert on %s for each row "
                 "execute function %s();" % (fn, when, action, fn, table, fn))
        return "drop trigger if exists %s on %s; drop function if exists " \
            "%s();" % (fn, table, fn)

    def await_sleeping(self, seconds=10):
        """True once a backend sleeps in pg_sleep (a slow trigger fired)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.int("select count(*) from pg_stat_activity "
                        "where wait_event = 'PgSleep'") > 0:
                return True
            time.sleep(0.02)
        return False
    def session(self):
        """A psql session kept open: for a lock the test holds."""
        return Session(self.conninfo)

    # The tenants whose rows counts() counts (set by env.Env): this
    # fixture's own, so that no other writer of the cluster moves them.
    tenants = ()

    def counts(self):
        """Row counts of the tables a rejected request must not touch,
        of this run's tenants only."""
        w = (" where api_key_id in (%s)" % ",".join(str(int(i)) for i in
                                                     self.tenants)
             if self.tenants else "")
        r = self.rows("select (select count(*) from idempotency_keys%s) k, "
                      "(select count(*) from payments%s) p, "
                      "(select count(*) from refunds%s) r" % (w, w, w))[0]
        return {"idempotency_keys": r["k"], "payments": r["p"],
                "refunds": r["r"]}


class Session:
    """One psql session, open until close(): what it locks stays locked
    (a session-level advisory lock, an open transaction's row locks).
    Statements are sent one by one and each answer read back.  A thread
    reads psql's output into a queue: select() on the pipe would miss
    lines already read ahead into the file object's buffer."""

    MARK = "__idem_session_done__"

    def __init__(self, conninfo):
        self.p = subprocess.Popen(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
             "-d", conninfo], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)            # EOF

    def run(self, sql, timeout=20):
        """Run sql and wait for it to finish; its output lines."""
        self.p.stdin.write("%s;\n\\echo %s\n" % (sql, self.MARK))
        self.p.stdin.flush()
        lines = []
        end = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, end -
                                                  time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if line.rstrip("\n") == self.MARK:
                return lines
            lines.append(line.rstrip("\n"))
        raise Failed("psql session did not answer %r: %s"
                     % (sql, self.close()))

    def close(self):
        """End the session (its locks go with it); the tail of its
        stderr."""
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.stderr.read()[-400:]


class T:
    """What a check gets: the environment plus assertions."""

    def __init__(self, env, name):
        self.env = env
        self.name = name
        self.suffix = ""
        self.notes = []
        self.last = None        # last Response, shown on failure

    def __getattr__(self, attr):
        # Convenience: t.post(...) is t.env.post(...), and remembers the
        # response for diagnostics.
        fn = getattr(self.env, attr)
        if attr in ("request", "post", "get", "raw", "fcgi"):
            def wrapped(*a, **kw):
                r = fn(*a, **kw)
                self.last = r
                return r
            return wrapped
        return fn

    # --- outcome ---------------------------------------------------------
    def fail(self, msg):
        raise Failed(msg)

    def skip(self, reason):
        raise Skipped(reason)

    def note(self, msg):
        self.notes.append(msg)

    def answered_by(self, who, r):
        """Say in the test name which component produced r, once r shows
        it: the app answers with its own problem (it carries an instance)
        or JSON; a web server with the sample's static problem page (no
        instance: r.is_server_page) or a page of its own that is not
        JSON.  "...error page": the sample's page only."""
        ct = (r.header("Content-Type") or "").split(";")[0].strip().lower()
        if who.startswith("the app"):
            ok = r.is_problem or (ct == "application/json" and
                                  not r.is_server_page)
        elif "error page" in who:
            ok = r.is_server_page
        else:
            ok = r.is_server_page or ct not in ("application/json",
                                                "application/problem+json")
        self.expect(ok, "said to be answered by %s, but the answer is not "
                    "its: %s" % (who, r.describe()[:300]))
        self.suffix = " (answered by %s)" % who

    # --- assertions ------------------------------------------------------
    def expect(self, cond, what):
        if not cond:
            raise Failed(what)

    def expect_eq(self, got, want, what):
        if got != want:
            raise Failed("%s: expected %r, got %r" % (what, want, got))

    def expect_status(self, r, want):
        wants = want if isinstance(want, (tuple, list, set)) else (want,)
        if r.status not in wants:
            raise Failed("expected HTTP %s, got %s"
                         % ("/".join(map(str, wants)), r.status))

    def expect_problem(self, r, status, slug, detail_has=None):
        """r is an application/problem+json response of this status/type."""
        self.last = r
        slugs = slug if isinstance(slug, (tuple, list)) else (slug,)
        self.expect_status(r, status)
        ct = (r.header("Content-Type") or "").split(";")[0].strip().lower()
        self.expect_eq(ct, "application/problem+json", "Content-Type")
        doc = r.json_or_fail()
        self.expect(isinstance(doc, dict), "problem body is not an object")
        for m in ("type", "title", "status", "detail"):
            self.expect(m in doc, "problem body has no %r member" % m)
        for m in ("type", "title", "detail"):
            self.expect(isinstance(doc[m], str),
                        "problem member %r is not a string" % m)
        self.expect(type(doc["status"]) is int,
                    "problem member 'status' is not an integer")
        self.expect_eq(doc["status"], r.status,
                       "problem 'status' member vs HTTP status")
        self.expect(any(doc["type"].endswith(s) and
                        (len(doc["type"]) == len(s) or
                         doc["type"][-len(s) - 1] in "/:#")
                        for s in slugs),
                    "problem type %r does not end in %s"
                    % (doc["type"], " or ".join(slugs)))
        self.expect(":" in doc["type"] or doc["type"].startswith("/"),
                    "problem type %r is not a URI" % doc["type"])
        if detail_has is not None:
            self.expect(detail_has in doc["detail"],
                        "problem detail %r does not name %r"
                        % (doc["detail"], detail_has))
        return doc

    def keyed_payment(self, **over):
        """A payment (payment_body(**over)) POSTed under a new key and
        answered 201: (the key, the response)."""
        k = self.new_key()
        r = self.post("/v1/payments", self.payment_body(**over), key=k)
        self.expect_status(r, 201)
        return k, r

    def expect_nothing_stored(self, fn):
        """fn(self) must store nothing and leave the worker alive."""
        if not getattr(self.env, "known_pids", None):
            self.remember_pids()
        before = self.db.counts()
        fn(self)
        self.expect_counts_unchanged(before)
        why = self.alive()
        self.expect(why is None, "worker not alive afterwards: %s" % why)

    def expect_counts_unchanged(self, before, what="row counts"):
        after = self.env.db.counts()
        if after != before:
            raise Failed("%s changed: before %r, after %r"
                         % (what, before, after))

    def expect_not_replayed(self, r):
        v = r.header("Idempotent-Replayed")
        self.expect(v is None or v.strip().lower() != "true",
                    "first execution carries Idempotent-Replayed: %r" % v)

    def expect_replay_of(self, r, first):
        """r replays first: same status, type, Location, body bytes."""
        self.last = r
        self.expect_eq(r.status, first.status, "replayed status")
        self.expect_eq((r.header("Idempotent-Replayed") or "").strip().lower(),
                       "true", "Idempotent-Replayed header")
        self.expect_eq(r.header("Content-Type"), first.header("Content-Type"),
                       "replayed Content-Type")
        self.expect_eq(r.header("Location"), first.header("Location"),
                       "replayed Location")
        if r.body != first.body:
            raise Failed("replayed body differs:\n  first:  %r\n  replay: %r"
                         % (first.body[:400], r.body[:400]))


def wait_until(cond, timeout, what, interval=0.05):
    """Poll cond() until it returns a true value (returned); Failed after
    timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise Failed("%s: not the case after %.1f s" % (what, timeout))
        time.sleep(interval)


def run_checks(env, only=None, out=sys.stdout):
    """Run registered checks; print TAP; return (passed, failed, skipped)."""
    n = 0
    passed = failed = skipped = 0
    for name, fn, needs in CHECKS:
        if only and not any(o in name for o in only):
            continue
        n += 1
        t = T(env, name)
        status, reason, diag = "ok", None, []
        started = time.monotonic()
        try:
            missing = [c for c in needs if not env.has(c)]
            if missing:
                raise Skipped(env.why_not(missing[0]))
            fn(t)
        except Skipped as e:
            status, reason = "skip", str(e)
        except Failed as e:
            status = "not ok"
            diag.append(str(e))
        except Exception:
            status = "not ok"
            diag.append(traceback.format_exc().rstrip())
        elapsed = time.monotonic() - started
        label = "[%s] %s%s" % (env.fixture, t.name, t.suffix)
        if status == "ok":
            passed += 1
            line = "ok %d - %s" % (n, label)
        elif status == "skip":
            skipped += 1
            line = "ok %d - %s # SKIP %s" % (n, label, reason)
        else:
            failed += 1
            line = "not ok %d - %s" % (n, label)
            if t.last is not None:
                diag.append("last response: " + t.last.describe())
        if t.notes:
            diag.extend(t.notes)
        if elapsed > 5:
            diag.append("took %.1fs" % elapsed)
        out.write(line + "\n")
        for d in diag:
            for ln in d.splitlines():
                out.write("#   " + ln + "\n")
        out.flush()
    out.write("1..%d\n" % n)
    out.flush()
    return passed, failed, skipped


def instrumented(pid):
    """Under a sanitizer or valgrind, RSS says nothing about the app
    itself."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read()
    except OSError:
        return False
    return any(s in maps for s in ("libasan", "libtsan", "vgpreload"))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pid_running(pid):
    """Alive and not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    state = st[st.rindex(")") + 2:].split()[0]
    return state not in ("Z", "X")


def children_of():
    """{pid: [its children's pids]} of every process now."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    return children


def app_pids(root_pids, name="payments.fcgi"):
    """pids of the processes among root_pids and their descendants whose
    executable's file name contains name."""
    children = children_of()
    found, todo = set(), list(root_pids)
    seen = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
        except OSError:
            exe = ""
        if name in exe:
            found.add(pid)
        todo.extend(children.get(pid, ()))
    return found
