#!/usr/bin/env python3
"""gauges.py - the store gauges of /metrics stay right after a large
eviction (sql/012: eviction moves a horizon, the gauges' index scans start
there instead of at the dead entries it left): against a real
payments.fcgi scraped on its [metrics] listen socket and PostgreSQL, the
gauges after eviction, after a record in progress below the horizon
becomes evictable, and after a past-dated record is written below it, each
against values written here and against the whole-table aggregates.
Its own database in the suite's cluster.  Prints TAP.  Usage:
  gauges.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import remove_tmp, scratch, run_args, run_main  # noqa: E402
from direct import (App, api_key, conf_text, done, free_port,  # noqa: E402
                    gauge, check, scrape, wait_for, write)

DEAD = 30000        # expired completed records, evicted at once
LIVE = 2000         # live ones, the oldest created 6 days - 1 s ago
DAY = 86400.0
SLACK = 30.0        # seconds between a value written and a scrape

# The gauges as the whole table says (what /metrics ran before sql/006).
WHOLE = ("SELECT coalesce(extract(epoch FROM now() - min(created_at) FILTER "
         "(WHERE expires_at > now())), 0), coalesce(extract(epoch FROM now() "
         "- min(expires_at) FILTER (WHERE idem_free(k))), 0), count(*) "
         "FILTER (WHERE state = 'in_progress'), count(*) FILTER (WHERE state "
         "= 'in_progress' AND recovery_point <> 'started' AND expires_at <= "
         "now()) FROM idempotency_keys k")
NAMES = ("idem_oldest_live_key_age_seconds", "idem_eviction_lag_seconds",
         "idem_in_progress_keys", "idem_unfinished_keys")


def row(d, tenant, key, state, point, created, expires, lease="NULL"):
    d.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
          "request_path, request_fingerprint, state, recovery_point, "
          "response_status, lease_until, created_at, expires_at) VALUES "
          "(%s, '%s', 'POST', '/v1/payments', decode(repeat('ab', 32), "
          "'hex'), '%s', '%s', %s, %s, now() - interval '%s', now() - "
          "interval '%s')" % (tenant, key, state, point,
                              "201" if state == "completed" else "NULL",
                              lease, created, expires))


def gauges(mport):
    text = scrape(mport)[1]
    return [gauge(text, n) for n in NAMES]


def near(got, want):
    return got is not None and abs(got - want) <= SLACK


def agrees(d, mport, what, first=0):
    """The scraped gauges from first on equal the whole-table aggregates
    (to the second: the two are read a moment apart)."""
    g = gauges(mport)
    w = [float(x) for x in d.sql(WHOLE).split("|")]
    same = None not in g and all(abs(a - b) < 2 for a, b in
                                 list(zip(g, w))[first:])
    check.expect(same, "%s: the gauges equal the whole-table aggregates" % what,
                 (g, w))
    return g


def evict_all(d):
    n = 0
    while True:
        k = int(d.sql("SELECT evicted FROM idem_evict_batch(5000)"))
        n += k
        if k < 5000:
            return n


def run(d, mport, tenant):
    d.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
          "request_path, request_fingerprint, state, recovery_point, "
          "response_status, created_at, expires_at) SELECT %s, 'dead-' || g, "
          "'POST', '/v1/payments', decode(repeat('ab', 32), 'hex'), "
          "'completed', 'finished', 201, now() - interval '8 days' + g * "
          "interval '1 millisecond', now() - interval '1 day' + g * "
          "interval '1 millisecond' FROM generate_series(1, %d) g"
          % (tenant, DEAD))
    d.sql("INSERT INTO idempotency_keys (api_key_id, key, request_method, "
          "request_path, request_fingerprint, state, recovery_point, "
          "response_status, created_at, expires_at) SELECT %s, 'live-' || g, "
          "'POST', '/v1/payments', decode(repeat('ab', 32), 'hex'), "
          "'completed', 'finished', 201, now() - interval '6 days' + g * "
          "interval '1 second', now() + interval '1 day' + g * "
          "interval '1 second' FROM generate_series(1, %d) g"
          % (tenant, LIVE))
    # In progress at 'started' with a live lease: not evictable until the
    # lease lapses (below), by which time eviction has moved past its
    # expiry.
    row(d, tenant, "started-1", "in_progress", "started", "3 days",
        "2 days", "now() + interval '1 hour'")
    # Past a recovery point: never evicted, counted as unfinished.
    row(d, tenant, "unfinished-1", "in_progress", "charged", "3 days",
        "50 hours", "now() + interval '1 hour'")
    # More than 1000 expired records wait: the oldest-live gauge is the age
    # of the 1000th oldest record, an upper bound (sql/006).
    g = agrees(d, mport, "with the backlog (but the oldest live)", 1)
    check.expect(near(g[1], DAY) and near(g[0], 8 * DAY - 1), "the lag is the oldest "
                 "expired record's, 1 day; the oldest live the 1000th record's, 8 "
                 "days (%s)" % g[:2])

    n = evict_all(d)
    check.expect(n == DEAD, "eviction deleted the %d expired completed records (%d)"
                 % (DEAD, n))
    lo = d.sql("SELECT extract(epoch FROM now() - expires_lo)::int, "
               "extract(epoch FROM now() - created_lo)::int FROM "
               "idem_evict_horizon").split("|")
    check.expect(int(lo[0]) < DAY - DEAD / 1000 + SLACK and
                 abs(int(lo[1]) - (6 * DAY - 1)) <= SLACK,
                 "the horizon moved past the deleted records: expires_lo to the "
                 "newest expiry deleted, created_lo to the oldest record left", lo)
    g = agrees(d, mport, "right after eviction")
    check.expect(near(g[0], 6 * DAY - 1) and g[1] == 0 and g[2] == 2 and g[3] == 1,
                 "oldest live 6 days, lag 0, 2 in progress, 1 unfinished (%s)" % g)

    # Its owner is gone: the lease lapses, nothing else of it changes.
    d.sql("UPDATE idempotency_keys SET lease_until = now() - interval "
          "'1 second' WHERE key = 'started-1'")
    g = agrees(d, mport, "a record in progress below the horizon, free")
    check.expect(near(g[1], 2 * DAY), "the lag is its expiry's, 2 days (%s)" % g[1])

    # Written below both horizons: the trigger lowers them.
    row(d, tenant, "late-1", "completed", "finished", "10 days", "3 days")
    g = agrees(d, mport, "a completed record written below the horizon")
    check.expect(near(g[1], 3 * DAY) and near(g[0], 6 * DAY - 1),
                 "the lag is its expiry's, 3 days; the oldest live unchanged (%s)" % g)
    n = evict_all(d)
    g = agrees(d, mport, "after evicting them")
    check.expect(n == 2 and g[1] == 0 and g[2] == 1 and g[3] == 1,
                 "eviction found both below the horizon (%d); lag 0, 1 in progress, "
                 "1 unfinished (%s)" % (n, g))


def main():
    a = run_args()
    tmp, d = scratch(a, "gauges")
    name = d.name
    try:
        mport = free_port()
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, name,
                              "[metrics]\nlisten = 127.0.0.1:%d\n" % mport))
        api_key(a.builddir, a.srcdir, conf, "gauges")
        tenant = d.sql("SELECT max(id) FROM api_keys")
        hold = d.hold_eviction()    # no janitor: eviction is the test's
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app.log"))
        try:
            check.expect(wait_for(lambda: scrape(mport)[0] == 200, 10),
                         "the app starts with [metrics] listen")
            run(d, mport, tenant)
        finally:
            app.stop()
            hold.release()
    finally:
        remove_tmp(tmp, d)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
