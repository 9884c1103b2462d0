#!/usr/bin/env python3
"""outbox_plans.py - a dispatcher's per-delivery statements cost the same
whatever the backlog, on a database of its own (the batch-10 slice of
docs/benchmark.md): with the statistics of idem_deliveries taken while the
outbox was drained (its partial indexes on pending deliveries look empty
to the planner) and then a backlog of BACKLOG pending deliveries,
idem_outbox_candidates() walks the endpoints with pending deliveries and
each one's next (idem_deliveries_endpoint, idem_deliveries_endpoint_due)
instead of reading and sorting every pending delivery, and
idem_outbox_delivered(), idem_outbox_failed() and idem_outbox_release()
each find their delivery through the primary key: a handful of buffers
each (auto_explain of the statements inside them), not the backlog.
Prints TAP.  Usage:
  outbox_plans.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import run_main, remove_tmp, scratch, api_key, conf_text, done, check, run_args, write  # noqa: E402

BACKLOG = 20000
# a dispatcher's take: the candidates (one per endpoint), then up to N
# deliveries of each one's endpoint
TAKE = ("SELECT id FROM idem_outbox_take(ARRAY(SELECT id FROM "
        "idem_outbox_candidates(false, '{}', 0, 10)), 60000, %d)")
# a lookup by primary key and the event's row: a few pages of each index
MAX_BUFFERS = 40


def explained(d, call):
    """The plans auto_explain logs for CALL and the statements in it."""
    p = subprocess.run(d.base + ["-d", d.name, "-c", "LOAD 'auto_explain'; "
                       "SET auto_explain.log_min_duration = 0; "
                       "SET auto_explain.log_nested_statements = on; "
                       "SET auto_explain.log_analyze = on; "
                       "SET auto_explain.log_buffers = on; "
                       "SET auto_explain.log_level = notice; "
                       "SET client_min_messages = notice; "
                       "BEGIN; SELECT %s; ROLLBACK" % call],
                       capture_output=True, text=True, check=True)
    return p.stderr


def take_plan(log):
    """The plan of idem_outbox_candidates()'s statement (each endpoint's
    next due delivery) in LOG, and the shared buffers it read."""
    for plan in log.split("NOTICE:  duration:"):
        if "WITH RECURSIVE eps" not in plan:
            continue
        m = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", plan)
        return plan, int(m.group(1)) + int(m.group(2) or 0) if m else None
    return log, None


def update_plan(log):
    """The plan of the UPDATE of idem_deliveries in LOG, and the shared
    buffers its top node read."""
    for plan in log.split("NOTICE:  duration:"):
        if "Update on idem_deliveries" not in plan:
            continue
        top = plan[plan.index("Update on idem_deliveries"):]
        m = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", top)
        n = int(m.group(1)) + int(m.group(2) or 0) if m else None
        return top, n
    return log, None


def main():
    a = run_args()
    tmp, d = scratch(a, "outbox_plans")
    name = d.name
    try:
        conf = os.path.join(tmp, "app.ini")
        write(conf, conf_text(a.pghost, a.pgport, name, ""))
        api_key(a.builddir, a.srcdir, conf, "plans")
        tenant = d.sql("SELECT max(id) FROM api_keys")
        d.sql("INSERT INTO idem_webhook_endpoints (api_key_id, url, secret, "
              "types) VALUES (%s, 'http://127.0.0.1:9/hooks', 'whsec_plans', "
              "'{payment.succeeded}')" % tenant)
        # statistics only when this test takes them
        d.sql("ALTER TABLE idem_deliveries SET (autovacuum_enabled = off)")
        # one event delivered, then the statistics of a drained outbox
        d.sql("SELECT idem_outbox_enqueue('evt_plans_0', %s, "
              "'payment.succeeded', '{}')" % tenant)
        first = d.sql(TAKE % 1)
        d.sql("SELECT idem_outbox_delivered(%s, 200)" % first)
        d.sql("VACUUM ANALYZE idem_deliveries")
        check.expect(d.sql("SELECT c.reltuples FROM pg_class c WHERE c.relname = "
                 "'idem_deliveries_endpoint'") == "0",
           "the partial index on pending deliveries is empty in the "
           "statistics")
        d.sql("SELECT idem_outbox_enqueue('evt_plans_' || g, %s, "
              "'payment.succeeded', '{}') FROM generate_series(1, %d) g"
              % (tenant, BACKLOG))
        taken = d.sql(TAKE % 3 + " ORDER BY id").split()
        check.expect(len(taken) == 3 and d.sql("SELECT count(*) FROM idem_deliveries "
                                     "WHERE state = 'pending'") ==
           str(BACKLOG), "a backlog of %d pending deliveries, 3 taken"
           % BACKLOG, taken)
        calls = [("idem_outbox_delivered", "idem_outbox_delivered(%s, 200)"
                  % taken[0]),
                 ("idem_outbox_failed", "idem_outbox_failed(%s, 1, 500, "
                  "'HTTP 500', 1000, false)" % taken[1]),
                 ("idem_outbox_release", "idem_outbox_release(%s, 1)"
                  % taken[2])]
        # the candidates: each endpoint's next due delivery, or its head,
        # through the endpoint's indexes; never all of the backlog, sorted
        for mode, index in (("false", "idem_deliveries_endpoint_due"),
                            ("true", "idem_deliveries_endpoint")):
            plan, n = take_plan(explained(d, "count(*) FROM "
                                          "idem_outbox_candidates(%s, "
                                          "'{}', 0, 10)" % mode))
            check.expect(index in plan and "Sort Method: quicksort  Memory: 1" not in
               plan and n is not None and n <= MAX_BUFFERS * 3,
               "idem_outbox_candidates(ordered = %s) finds due deliveries through "
               "%s, %s buffers (<= %d) beside a backlog of %d"
               % (mode, index, n, MAX_BUFFERS * 3, BACKLOG), plan)
        for fn, call in calls:
            plan, n = update_plan(explained(d, call))
            check.expect("Index Scan using idem_deliveries_pkey" in plan and
               n is not None and n <= MAX_BUFFERS,
               "%s() finds its delivery by the primary key, %s buffers "
               "(<= %d) beside a backlog of %d" % (fn, n, MAX_BUFFERS,
                                                   BACKLOG), plan)
    finally:
        remove_tmp(tmp, d)
    done()


if __name__ == "__main__":
    main()
