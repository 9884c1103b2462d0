#!/usr/bin/env python3
"""roundtrips.py - count the client-server round trips of the middleware.

A proxy sits between payments.fcgi and PostgreSQL and counts the client's
sends ("flights": data sent after the server last spoke).  Each request is
sent straight over FastCGI with cgi-fcgi, one at a time, on a pool of one
connection, and the test asserts:
  new key            2 flights, both waited on (db_round_trips 2 in the log)
  replay, 409, 422   1 flight waited on; the 2nd send is the ROLLBACK that
                     goes out without waiting for its answer
and that a new key's record is written once (one INSERT, no UPDATE,
counted by a trigger of its own while the test runs).  The counts above
are for a secret the app confirmed in the last few seconds (its cache of
secret hashes, idem(3)); the first request of a secret costs one lookup
more, and an unknown secret only that lookup:
  first new key      3 flights: the api_keys lookup, then the 2 above
  unknown secret     1 flight (the lookup), 401 before the body is parsed
Prints TAP.  Usage:
  roundtrips.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import hashlib
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import App, api_key, done, check, wait_for, write_conf  # noqa: E402

class Proxy:
    """Unix-socket proxy that records each client flight's first bytes."""

    def __init__(self, listen_path, target_path):
        self.flights = []
        self.lock = threading.Lock()
        self.target = target_path
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(listen_path)
        self.srv.listen(16)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.srv.accept()
            threading.Thread(target=self.pump, args=(c,), daemon=True).start()

    def pump(self, c):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.target)
        last = "server"
        while True:
            r, _, _ = select.select([c, s], [], [])
            for fd in r:
                data = fd.recv(65536)
                if not data:
                    c.close()
                    s.close()
                    return
                if fd is c:
                    if last == "server":
                        with self.lock:
                            self.flights.append(data[:64])
                    last = "client"
                    s.sendall(data)
                else:
                    last = "server"
                    c.sendall(data)

    def count(self):
        with self.lock:
            return len(self.flights)

    def since(self, n):
        with self.lock:
            return list(self.flights[n:])


def main():
    a = run_args()

    tmp = tempfile.mkdtemp(prefix="idem-rt.")
    port = a.pgport
    proxy = Proxy(os.path.join(tmp, ".s.PGSQL.%s" % port),
                  os.path.join(a.pghost, ".s.PGSQL.%s" % port))
    conf = os.path.join(tmp, "rt.ini")
    # Only the requests' statements cross the proxy: no dispatcher thread
    # polling the outbox, no janitor run while the test counts.
    write_conf(conf, tmp, port, "pool_size = 1\n[server]\nthreads = 1\n"
               "[idempotency]\nevict_interval = 1h\n"
               "[webhooks]\ndispatcher = off\n")
    # idemctl talks to the server directly, not through the proxy.
    direct = os.path.join(tmp, "direct.ini")
    write_conf(direct, a.pghost, port)
    secret = api_key(a.builddir, a.srcdir, direct,
                     "roundtrips-%d" % os.getpid())
    app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
              os.path.join(tmp, "app.log"))
    def psql(sql):
        return subprocess.run(
            ["psql", "-h", a.pghost, "-p", port, "-U", "postgres", "-XAt",
             "-v", "ON_ERROR_STOP=1", "-c", sql],
            capture_output=True, text=True, check=True).stdout.strip()

    # Every write to a key record, while this test runs.
    writes = "rt_writes_%d" % os.getpid()
    psql("CREATE TABLE %(w)s (op text, api_key_id bigint, key text);"
         "CREATE FUNCTION %(w)s() RETURNS trigger LANGUAGE plpgsql AS $$"
         " BEGIN INSERT INTO %(w)s VALUES (TG_OP, NEW.api_key_id, NEW.key);"
         " RETURN NEW; END $$;"
         "CREATE TRIGGER %(w)s AFTER INSERT OR UPDATE ON idempotency_keys"
         " FOR EACH ROW EXECUTE FUNCTION %(w)s()" % {"w": writes})
    try:
        def request(method, uri, body=b"", key=None):
            return app.request(secret, method, uri, body, key)[0]

        def after_rollback(n0):
            """The flights since n0 once the unwaited ROLLBACK is among
            them: the app answers before it sends it, so reading at once
            could miss it (and count it in the next case)."""
            wait_for(lambda: any(b"ROLLBACK" in f for f in proxy.since(n0)),
                     10)
            return proxy.since(n0)

        head = request("GET", "/healthz")
        check.expect(head.startswith("Status: 200"), "app answers /healthz", head)

        body = b'{"amount":100,"currency":"eur"}'
        cases = []
        n0 = proxy.count()
        head = request("POST", "/v1/payments", body, "rt-0")
        cases.append(("first new key", head, "201", proxy.since(n0), 3, 3))

        n0 = proxy.count()
        head = request("POST", "/v1/payments", body, "rt-1")
        cases.append(("new key", head, "201", proxy.since(n0), 2, 2))

        n0 = proxy.count()
        head = request("POST", "/v1/payments", body, "rt-1")
        cases.append(("replay", head, "201", after_rollback(n0), 2, 1))

        n0 = proxy.count()
        head = request("POST", "/v1/payments",
                       b'{"amount":101,"currency":"eur"}', "rt-1")
        cases.append(("422", head, "422", after_rollback(n0), 2, 1))

        # 409: hold the key's advisory lock from another session.
        h = hashlib.sha256(hashlib.sha256(secret.encode()).digest() +
                           b"rt-2").digest()
        lock = int.from_bytes(h[:8], "big", signed=True)
        holder = subprocess.Popen(
            ["psql", "-h", a.pghost, "-p", port, "-U", "postgres", "-At",
             "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        holder.stdin.write("SELECT pg_advisory_lock(%d);\n\\echo held\n"
                           % lock)
        holder.stdin.flush()
        held = holder.stdout.readline().strip() + \
            holder.stdout.readline().strip()
        n0 = proxy.count()
        head = request("POST", "/v1/payments", body, "rt-2")
        cases.append(("409", head, "409", after_rollback(n0), 2, 1))
        holder.stdin.close()
        holder.wait(timeout=10)
        check.expect("held" in held, "another session holds the key's lock", held)

        n0 = proxy.count()
        head = app.request("sk_unknown_%d" % os.getpid(), "POST",
                           "/v1/payments", b"[" + b"0," * 100000 + b"0]",
                           "rt-3")[0]
        cases.append(("unknown secret", head, "401", proxy.since(n0), 1, 1))

        for name, head, status, flights, nflights, waited in cases:
            check.expect(head.startswith("Status: " + status),
                         "%s: status %s" % (name, status), head)
            check.expect(len(flights) == nflights,
                         "%s: %d client flights to PostgreSQL" % (name, nflights),
                         "flights: %r" % flights)
            if name in ("replay", "422", "409"):
                check.expect(len(flights) >= 2 and b"ROLLBACK" in flights[-1],
                             "%s: the second flight is the unwaited ROLLBACK" % name,
                             flights)
        # The log says how many flights each request waited on (its info
        # lines are written within 100 ms of being made).
        want = [("created", 3), ("created", 2), ("replayed", 1),
                ("reused", 1), ("in_flight", 1), ("rejected", 1)]

        def posted():
            return [(r.get("outcome"), r.get("db_round_trips"))
                    for r in app.log_lines() if r.get("msg") == "request"
                    and r.get("method") == "POST"]
        got = wait_for(lambda: len(posted()) >= len(want) and posted(), 5)
        check.expect(got == want, "waited-on round trips per outcome %r" % want, got)
        ops = psql("SELECT coalesce(string_agg(op, ',' ORDER BY op), '')"
                   " FROM %s w JOIN api_keys a ON a.id = w.api_key_id"
                   " WHERE a.secret_hash = sha256(convert_to('%s', 'UTF8'))"
                   " AND w.key = 'rt-1'" % (writes, secret))
        check.expect(ops == "INSERT", "new key: its record is written once (one INSERT,"
                     " no UPDATE); replay and 422 write nothing", "writes: %r" % ops)
    finally:
        app.stop()
        psql("DROP TRIGGER %(w)s ON idempotency_keys; DROP FUNCTION %(w)s();"
             " DROP TABLE %(w)s" % {"w": writes})
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
