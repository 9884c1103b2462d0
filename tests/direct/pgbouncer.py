#!/usr/bin/env python3
"""pgbouncer.py - the middleware through pgbouncer in transaction pooling
mode: new, replay, 422, and concurrent requests, none of which may hang;
[database] prepared_statements = auto detects the pooler and sends every
statement unnamed; the outbox's dispatcher (the app's thread and two
`deliver` processes at once) delivers through it, each event once.  Prints TAP.  Usage:
  pgbouncer.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.dont_write_bytecode = True
from direct import run_args, run_main  # noqa: E402
from direct import (App, Db, api_key, done, missing, check,  # noqa: E402
                    wait_for, write_conf)
from harness import free_port  # noqa: E402

def main():
    a = run_args()
    if shutil.which("pgbouncer") is None:
        missing("pgbouncer", "pgbouncer is not installed")
        return done()

    tmp = tempfile.mkdtemp(prefix="idem-pgb.")
    os.chmod(tmp, 0o755)
    port = free_port()
    ini = os.path.join(tmp, "pgbouncer.ini")
    with open(ini, "w") as f:
        f.write("[databases]\npostgres = host=%s port=%s dbname=postgres "
                "user=postgres\n[pgbouncer]\nlisten_addr =\nlisten_port = %d\n"
                "unix_socket_dir = %s\nauth_type = trust\nauth_file = %s\n"
                "pool_mode = transaction\ndefault_pool_size = 4\n"
                "max_client_conn = 100\nlogfile = %s\npidfile = %s\n"
                "query_wait_timeout = 10\n"
                % (a.pghost, a.pgport, port, tmp,
                   os.path.join(tmp, "users.txt"),
                   os.path.join(tmp, "pgbouncer.log"),
                   os.path.join(tmp, "pgbouncer.pid")))
    with open(os.path.join(tmp, "users.txt"), "w") as f:
        f.write('"postgres" ""\n')
    cmd = ["pgbouncer", "-d", ini]
    if os.getuid() == 0:
        # pgbouncer refuses root: its files belong to postgres.
        pw = pwd.getpwnam("postgres")
        for name in os.listdir(tmp) + [""]:
            os.chown(os.path.join(tmp, name), pw.pw_uid, pw.pw_gid)
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    subprocess.run(cmd, check=True)
    sockpath = os.path.join(tmp, ".s.PGSQL.%d" % port)
    deadline = time.time() + 10
    while not os.path.exists(sockpath) and time.time() < deadline:
        time.sleep(0.05)
    check.expect(os.path.exists(sockpath), "pgbouncer listens")

    direct = os.path.join(tmp, "direct.ini")
    write_conf(direct, a.pghost, a.pgport)
    tenant = "pgbouncer-%d-%d" % (os.getpid(), int(time.time()))
    secret = api_key(a.builddir, a.srcdir, direct, tenant)
    conf = os.path.join(tmp, "app.ini")
    write_conf(conf, tmp, port, "pool_size = 8\nacquire_timeout = 5s\n"
               "[webhooks]\nallow_private = on\ninterval = 100ms\n")
    app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
              os.path.join(tmp, "app.log"))
    try:
        body = b'{"amount":700,"currency":"eur"}'
        s1, r1 = app.request(secret, "POST", "/v1/payments", body, "pgb-1")
        check.expect(s1.startswith("Status: 201"), "new key through pgbouncer: 201", s1)
        s2, r2 = app.request(secret, "POST", "/v1/payments", body, "pgb-1")
        check.expect(s2.startswith("Status: 201") and
                     b"Idempotent-Replayed: true" in r2, "replay through pgbouncer", s2)
        check.expect(r1.split(b"\r\n\r\n", 1)[-1] == r2.split(b"\r\n\r\n", 1)[-1],
                     "replayed body is byte-identical")
        s3, _ = app.request(secret, "POST", "/v1/payments",
                            b'{"amount":701,"currency":"eur"}', "pgb-1")
        check.expect(s3.startswith("Status: 422"), "changed body: 422", s3)

        # 24 concurrent requests: 16 distinct keys and 8 of one key.
        results = {}

        def worker(i):
            key = "pgb-c%d" % i if i < 16 else "pgb-same"
            results[i] = app.request(secret, "POST", "/v1/payments", body,
                                     key, timeout=15)[0]
        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(24)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - t0
        distinct = [results[i] for i in range(16)]
        same = [results[i] for i in range(16, 24)]
        check.expect(all(s.startswith("Status: 201") for s in distinct),
                     "16 concurrent new keys: all 201", distinct)
        check.expect(all(s.startswith("Status: 201") or s.startswith("Status: 409")
                         for s in same), "8 concurrent same key: 201 or 409", same)
        check.expect(took < 10, "no request hangs (%.1f s for all)" % took)
        def sql(q):
            return subprocess.run(["psql", "-h", a.pghost, "-p", a.pgport,
                                   "-U", "postgres", "-Atc", q],
                                  capture_output=True,
                                  text=True).stdout.strip()
        n = sql("SELECT count(*) FROM idempotency_keys k JOIN api_keys a ON "
                "a.id = k.api_key_id WHERE a.name = '%s' AND "
                "k.key = 'pgb-same'" % tenant)
        check.expect(n == "1", "one record for the concurrent key", n)
        n = sql("SELECT count(*) FROM payments p JOIN api_keys a ON "
                "a.id = p.api_key_id WHERE a.name = '%s'" % tenant)
        check.expect(n == "18", "exactly one payment per key (18)", n)
        # prepared_statements = auto: the pid pgbouncer announces is not
        # the backend's, so every statement went unnamed.
        with open(os.path.join(tmp, "app.log")) as f:
            log = f.read()
        check.expect("a connection pooler answers for the server" in log,
                     "auto: the pooler is detected (logged)")
        check.expect("prepared statement" not in log,
                     "no prepared-statement error behind the pooler")

        # The outbox behind the pooler: no session state, no advisory lock.
        from outbox import endpoint, enqueue
        from webhook_receiver import Receiver    # on outbox's path
        d = Db(a.pghost, a.pgport, "postgres")
        tid = d.sql("SELECT id FROM api_keys WHERE name = '%s'" % tenant)
        rcv = Receiver(ok_status=200)
        try:
            endpoint(d, tid, rcv.url_of("/pgb"), ["t.pgb"])
            def delivered():
                return int(d.sql(
                    "SELECT count(*) FROM idem_deliveries d JOIN idem_events"
                    " e ON e.id = d.event WHERE e.api_key_id = %s AND "
                    "d.state = 'delivered' AND d.attempts = 1" % tid))
            first = [enqueue(d, tid, "t.pgb") for _ in range(10)]
            check.expect(wait_for(lambda: delivered() == 10, 20),
                         "the app's dispatcher delivers through pgbouncer",
                         delivered())
            # The app's dispatcher stops: the 150 more are the deliver
            # processes' alone.  Each may take at most 75, so each must
            # deliver some, whichever starts first.
            check.expect(app.stop() == 0, "the app exits 0 on SIGTERM (its "
                         "dispatcher stopped)", app.proc.returncode)
            # In one statement: a psql per event would be the slow part.
            d.sql("SELECT idem_outbox_enqueue('evt_pgb_%d_' || g, %s, "
                  "'t.pgb', '{\"n\": ' || g || '}') FROM "
                  "generate_series(1, 150) g" % (os.getpid(), tid))
            more = d.sql("SELECT event_id FROM idem_events WHERE event_id "
                         "LIKE 'evt_pgb_%d_%%'" % os.getpid()).split()
            procs = [subprocess.Popen(
                [os.path.join(a.builddir, "apps/payments/payments.fcgi"),
                 "-c", conf, "deliver", "75"], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True) for _ in range(2)]
            outs = [p.communicate(timeout=60) for p in procs]
            counts = [re.match(r"delivered (\d+), failed 0 \(dead 0\)",
                               o[0]) for o in outs]
            counts = [int(m.group(1)) if m else None for m in counts]
            check.expect(all(p.returncode == 0 for p in procs) and
                         all(c is not None and c > 0 for c in counts) and
                         sum(counts) == 150,
                         "two deliver processes through pgbouncer: each exits 0 and "
                         "delivers some, 150 in all, none failed",
                         ([p.returncode for p in procs], outs))
            check.expect(delivered() == 160, "the 160 deliveries recorded delivered, "
                         "each at its first attempt", delivered())
            ids = rcv.ids("/pgb")
            check.expect(len(ids) == 160 and sorted(set(ids)) == sorted(first + more),
                         "three dispatchers behind the pooler: each of the 160 events "
                         "received once (%d requests)" % len(ids))
            check.expect(all("prepared statement" not in o[1] for o in outs),
                         "no prepared-statement error in the deliver processes")
        finally:
            rcv.stop()
    finally:
        app.stop()
        pid = open(os.path.join(tmp, "pgbouncer.pid")).read().strip() \
            if os.path.exists(os.path.join(tmp, "pgbouncer.pid")) else None
        if pid:
            subprocess.run(["kill", pid])
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
