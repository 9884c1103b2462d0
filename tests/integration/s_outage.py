"""s_outage.py - the database goes away and comes back (runs last).

The database is made to refuse connections (ALLOW_CONNECTIONS false, set
from another database) and the app's connections are terminated; then it
is restored.  Requests meanwhile must get 503 service-unavailable and
store nothing; afterwards the app must recover by itself."""

import re
import time

from env import NO_AUTH
from harness import DB, check

PAY = "/v1/payments"


def _admin(t):
    """A connection to template1, which stays open to us throughout."""
    ci = t.db.conninfo
    if re.search(r"\bdbname=\S+", ci):
        ci = re.sub(r"\bdbname=\S+", "dbname=template1", ci)
    else:
        ci += " dbname=template1"
    return DB(ci)


def _db_name(t):
    return t.db.scalar("select current_database()")


def _take_down(t, admin, name, ident):
    """Refuse new connections, end the app's, and wait until none of them
    is left (no fixed sleep: pg_terminate_backend only signals)."""
    lit = name.replace("'", "''")
    admin.run("alter database %s allow_connections false; "
              "select pg_terminate_backend(pid) from pg_stat_activity "
              "where datname = '%s' and pid <> pg_backend_pid();"
              % (ident, lit))
    deadline = time.monotonic() + 30
    while admin.int("select count(*) from pg_stat_activity where "
                    "datname = '%s'" % lit) > 0:
        if time.monotonic() > deadline:
            t.fail("the app's connections still there 30 s after "
                   "pg_terminate_backend")
        time.sleep(0.05)


@check("database outage: /healthz and requests -> 503 "
       "service-unavailable, nothing stored")
def _(t):
    admin = _admin(t)
    name = _db_name(t)
    before = t.db.counts()
    ident = '"%s"' % name.replace('"', '""')
    k = t.new_key("outage")
    try:
        _take_down(t, admin, name, ident)
        h = t.get("/healthz", token=NO_AUTH, timeout=30)
        t.expect_problem(h, 503, "service-unavailable")
        r = t.post(PAY, t.payment_body(), key=k, timeout=30)
        t.expect_problem(r, 503, "service-unavailable")
        r = t.get(PAY, timeout=30)
        t.expect_problem(r, 503, "service-unavailable")
    finally:
        admin.run("alter database %s allow_connections true" % ident)
    t.expect_counts_unchanged(before)
    t.expect_eq(t.db.int("select count(*) from idempotency_keys where "
                         "key = '%s'" % k), 0, "records of the 503's key")


@check("database back: the app recovers by itself (/healthz 200 within "
       "15 s, then a POST -> 201)")
def _(t):
    # Its own outage first, so that this holds whatever ran before.
    admin = _admin(t)
    name = _db_name(t)
    ident = '"%s"' % name.replace('"', '""')
    try:
        _take_down(t, admin, name, ident)
        h = t.get("/healthz", token=NO_AUTH, timeout=30)
        t.expect_problem(h, 503, "service-unavailable")
    finally:
        admin.run("alter database %s allow_connections true" % ident)
    deadline = time.monotonic() + 15
    last = None
    while time.monotonic() < deadline:
        try:
            last = t.get("/healthz", token=NO_AUTH, timeout=10)
            if last.status == 200:
                break
        except OSError as e:
            last = e
        time.sleep(0.2)
    else:
        t.fail("GET /healthz still not 200 after 15 s: %r"
               % (last.describe() if hasattr(last, "describe") else last))
    # every pooled connection was broken: several requests in a row
    for i in range(10):
        r = t.post(PAY, t.payment_body(), key=t.new_key("back"))
        t.expect(r.status == 201, "POST %d after recovery answered %s"
                 % (i + 1, r.status))
