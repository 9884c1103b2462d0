#!/usr/bin/env python3
"""store_scale.py - the measurements of tests/bench/store-scale, on the
PostgreSQL it started (see there).  In one run, in this order:

 1. creates (tests/bench/create.sql, the app's SQL of one POST
    /v1/payments with a new key, pgbench -c CLIENTS) on the empty store;
 2. the fill: ROWS completed records, created_at spread evenly over the
    past 7 days and expires_at 7 days after (the steady state of a 7-day
    TTL), plus ROWS/7 more whose expiry passed in the last day (the backlog
    of one day without eviction); bytes per key;
 3. the /metrics store gauges (idem_store_gauges(), sql/006) against the
    whole-table aggregates they replaced, and one scrape of a running
    payments.fcgi on its [metrics] listen socket;
 4. creates on the full store: throughput and p99 against 1 (target
    >= 0.9 x, and p99 alike), WAL per key written;
 5. creates while eviction (idemctl evict, batches of 10000) works the
    backlog off: the eviction rate in keys/s and the create p99 against
    4 (target <= 1.5 x);
 6. a mass eviction: a fresh day of expired records (ROWS/7, at least
    1 M at 10 M records) evicted by idemctl evict with autovacuum off for
    the table (so that no vacuum runs before the scrape), then the gauges
    at once, and the queries they ran before sql/012 (from the head of
    the indexes) on the same dead entries; target < 10 ms;
 7. time partitioning against batched DELETE: one day of records in a
    table partitioned by expires_at, dropped as a partition, against the
    same day in the store deleted as eviction does (time, WAL per key
    evicted, after a checkpoint); and whether (tenant, key) can stay
    unique.
Prints each figure as it goes and a Markdown table at the end.
"""

# The store gauges as sql/006 ran them: from the head of both indexes.
GAUGES_006 = (
    "SELECT coalesce((SELECT extract(epoch FROM now() - min(o.created_at) "
    "FILTER (WHERE o.expires_at > now() OR o.n = 1000)) FROM (SELECT "
    "k.created_at, k.expires_at, row_number() OVER (ORDER BY k.created_at) "
    "AS n FROM idempotency_keys k ORDER BY k.created_at LIMIT 1000) o), 0), "
    "coalesce((SELECT extract(epoch FROM now() - k.expires_at) FROM "
    "idempotency_keys k WHERE k.expires_at <= now() AND idem_free(k) ORDER "
    "BY k.expires_at LIMIT 1), 0), (SELECT count(*) FROM idempotency_keys k "
    "WHERE k.state = 'in_progress'), (SELECT count(*) FROM idempotency_keys "
    "k WHERE k.state = 'in_progress' AND k.recovery_point <> 'started' AND "
    "k.expires_at <= now())")

import argparse
import os
import re
import subprocess
import threading
import time
import urllib.request

A = None
DAY = 86400


def psql(q, db=None):
    p = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                        "-d", db or A.conninfo, "-c", q],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("psql: %s\n%s" % (q[:200], p.stderr))
    return p.stdout.strip()


def wal_lsn():
    return int(psql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))


def say(*a):
    print(*a, flush=True)


def pctl(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    return sorted_vals[min(len(sorted_vals) - 1,
                           int(len(sorted_vals) * p / 100))]


def pgbench(tag, script, secs, clients, defines):
    """tps, p50 and p99 (ms) and the transaction count of one run."""
    out = os.path.join(A.tmp, "pgb-" + tag)
    os.makedirs(out, exist_ok=True)
    cmd = ["pgbench", "-n", "-M", "simple", "-c", str(clients), "-j",
           str(min(clients, 2)), "-T", str(secs), "-l",
           "--log-prefix=" + os.path.join(out, "txn"), "-f", script]
    for k, v in defines.items():
        cmd += ["-D", "%s=%s" % (k, v)]
    p = subprocess.run(cmd + ["-d", A.conninfo], capture_output=True,
                       text=True)
    m = re.search(r"tps = ([0-9.]+) \(without", p.stdout)
    lat = []
    for f in os.listdir(out):
        with open(os.path.join(out, f)) as fh:
            lat += [int(line.split()[2]) / 1000.0 for line in fh]
        os.unlink(os.path.join(out, f))
    lat.sort()
    r = dict(tps=float(m.group(1)) if m else 0.0, n=len(lat),
             p50=pctl(lat, 50), p99=pctl(lat, 99))
    say("  %s: %.0f tps, p50 %.2f ms, p99 %.2f ms (%d)" % (tag, r["tps"],
        r["p50"], r["p99"], r["n"]))
    if not m:
        say(p.stdout[-2000:], p.stderr[-2000:])
    return r


def creates(tag, secs=None):
    return pgbench(tag, os.path.join(A.srcdir, "tests/bench/create.sql"),
                   secs or A.secs, A.clients,
                   dict(tenant=A.tenant, hash=A.hash, n=0, run=tag,
                        created=int(time.time())))


# One completed record as the app stores it (sizes of a real payment).
RECORD = ("%s, 'f-' || g, 'POST', '/v1/payments', "
          "decode(md5(g::text) || md5(g::text), 'hex'), 'completed', "
          "'finished', 201, '{\"Content-Type\":\"application/json\","
          "\"Location\":\"/v1/payments/pay_0123456789abcdef01234567\"}'::jsonb, "
          "convert_to(repeat('x', 197), 'UTF8')")


def fill(table, first, count, created, expires, chunk=500000):
    """count records 'f-first..' with created_at/expires_at SQL of g.
    Into the store without the trigger that lowers the eviction horizon
    for past-dated records (sql/012: 12 us a record), the horizon reset to
    the start instead (what the trigger would end with)."""
    if table == "idempotency_keys":
        psql("ALTER TABLE idempotency_keys DISABLE TRIGGER "
             "idem_evict_horizon_lower")
    for lo in range(first, first + count, chunk):
        hi = min(first + count, lo + chunk) - 1
        psql("INSERT INTO %s (api_key_id, key, request_method, request_path,"
             " request_fingerprint, state, recovery_point, response_status,"
             " response_headers, response_body, created_at, expires_at)"
             " SELECT %s, %s, %s FROM generate_series(%d, %d) g"
             % (table, RECORD % A.tenant, created, expires, lo, hi))
    if table == "idempotency_keys":
        psql("UPDATE idem_evict_horizon SET expires_lo = '-infinity', "
             "created_lo = '-infinity'")
        psql("ALTER TABLE idempotency_keys ENABLE TRIGGER "
             "idem_evict_horizon_lower")


def timed(q, n, first=False):
    """Mean milliseconds of q over n runs, in one session (\\timing); with
    first, (the first run, the mean of the others)."""
    p = subprocess.run(["psql", "-X", "-q", "-d", A.conninfo],
                       input="\\timing on\n" + (q + ";\n") * n,
                       capture_output=True, text=True)
    t = [float(x) for x in re.findall(r"Time: ([0-9.]+) ms", p.stdout)]
    t0 = t[0] if t else float("nan")
    t = t[1:] or t      # the first one plans (and warms) it
    mean = sum(t) / len(t) if t else float("nan")
    return (t0, mean) if first else mean


def mass_eviction(n):
    """n records of one expired day, evicted at once; the gauges right
    after, before any vacuum (autovacuum off for the table meanwhile)."""
    first = 60000000
    dead = ("now() - interval '8 days' + (g %% %d) * interval '%f seconds'"
            % (n, float(DAY) / n))
    fill("idempotency_keys", first, n, dead, "(%s) + interval '7 days'"
         % dead)
    psql("VACUUM ANALYZE idempotency_keys")
    psql("ALTER TABLE idempotency_keys SET (autovacuum_enabled = off)")
    vac0 = psql("SELECT coalesce(autovacuum_count, 0) + coalesce("
                "vacuum_count, 0) FROM pg_stat_user_tables WHERE relname = "
                "'idempotency_keys'")
    # One session, as a scraper's pooled connection: both queries planned
    # and run once before, so that the first run after is not a cold
    # backend's (catalog loading, 15-30 ms here); eviction from psql (\\!).
    gauges = "SELECT * FROM idem_store_gauges();\n"
    script = ("\\timing on\n" + gauges + GAUGES_006 + ";\n"
              "\\! t0=$(date +%%s.%%N); %s -c %s evict --batch 10000; "
              "echo \"took $t0 $(date +%%s.%%N)\"\n" % (
                  os.path.join(A.builddir, "apps/idemctl/idemctl"), A.conf)
              + gauges * 50 + (GAUGES_006 + ";\n") * 50 +
              # the pages each read, after (the gauges' body from pg_proc)
              "\\timing off\nSELECT prosrc AS body FROM pg_proc WHERE "
              "proname = 'idem_store_gauges' \\gset\n"
              "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) :body;\n"
              "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + GAUGES_006 + ";\n")
    out = subprocess.run(["psql", "-X", "-q", "-d", A.conninfo],
                         input=script, capture_output=True, text=True).stdout
    before, after = out.split("took ", 1)
    m = re.search(r"evicted (\d+) keys", before)
    evicted = int(m.group(1)) if m else 0
    t = [float(x) for x in after.split()[:2]]
    took = t[1] - t[0]
    ms = [float(x) for x in re.findall(r"Time: ([0-9.]+) ms", after)]
    # The first Buffers line of each plan is its top node's: the total.
    bufs = []
    for plan in after.split("QUERY PLAN")[1:3]:
        m = re.search(r"Buffers: (.*)", plan)
        bufs.append(sum(int(x) for x in re.findall(r"(?:hit|read)=(\d+)",
                                                   m.group(1))) if m else -1)
    ms = ms[:100]
    if len(ms) != 100:
        ms = [float("nan")] * 100
    new = (ms[0], sum(ms[1:50]) / 49)
    old = (ms[50], sum(ms[51:]) / 49)
    vac1 = psql("SELECT coalesce(autovacuum_count, 0) + coalesce("
                "vacuum_count, 0) FROM pg_stat_user_tables WHERE relname = "
                "'idempotency_keys'")
    psql("ALTER TABLE idempotency_keys RESET (autovacuum_enabled)")
    return dict(n=evicted, secs=took, new=new, old=old, bufs=bufs,
                vacuumed=vac0 != vac1)


def scrape_app():
    """Milliseconds of GET /metrics on a running app's [metrics] listen."""
    conf = os.path.join(A.tmp, "scrape.ini")
    with open(A.conf) as f:
        text = f.read()
    port = 19000 + os.getpid() % 1000
    with open(conf, "w") as f:
        f.write(text + "\n[metrics]\nlisten = 127.0.0.1:%d\n" % port)
    app = subprocess.Popen([os.path.join(A.builddir,
                            "apps/payments/payments.fcgi"), "-c", conf,
                            "-l", os.path.join(A.tmp, "scrape.sock")],
                           stderr=subprocess.DEVNULL)
    best = []
    try:
        for _ in range(100):
            try:
                t0 = time.time()
                urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                       timeout=5).read()
                best.append((time.time() - t0) * 1000)
                if len(best) == 21:
                    break
            except OSError:
                time.sleep(0.1)
    finally:
        app.terminate()
        app.wait()
    best = sorted(best[1:])
    return pctl(best, 50) if best else float("nan")


def evict_during_creates(secs):
    """Creates for secs while idemctl evicts the backlog in chunks of 10
    batches; (create run, keys/s while it evicted, keys evicted)."""
    idemctl = os.path.join(A.builddir, "apps/idemctl/idemctl")
    ev = subprocess.Popen(["bash", "-c", "end=$((SECONDS + %d)); "
                           "while [ $SECONDS -lt $end ]; do %s -c %s evict "
                           "--batch 10000 --max-batches 10 || exit 1; done"
                           % (secs, idemctl, A.conf)],
                          stdout=subprocess.PIPE, text=True)
    r = creates("create-evicting", secs)
    out = ev.communicate()[0]
    runs = [(int(n), float(t)) for n, t in
            re.findall(r"evicted (\d+) keys in ([0-9.]+) s", out)]
    n = sum(k for k, _ in runs)
    busy = sum(t for k, t in runs if k > 0)
    return r, n / busy if busy else 0.0, n


def evict_paced_during_creates(secs, duty=25, batch=10000):
    """Creates for secs while the backlog is evicted as the janitor paces
    it at its starting duty (lib/pure/backoff.c idem_evict_pause_us: after a
    full batch, a pause of batch time x (100 - duty) / duty); one batch per
    psql, under the fleet lock, as lib/io/store.c runs it.  (create run,
    keys/s over the whole run, keys evicted)."""
    stop = threading.Event()
    got = {"n": 0}

    def evictor():
        while not stop.is_set():
            t0 = time.monotonic()
            out = psql("BEGIN; SELECT pg_try_advisory_xact_lock(7236491087);"
                       " SELECT evicted FROM idem_evict_batch(%d); COMMIT"
                       % batch)
            k = int(out.split()[-1]) if out else 0
            got["n"] += k
            if k < batch:
                break
            stop.wait((time.monotonic() - t0) * (100 - duty) / duty)
    th = threading.Thread(target=evictor)
    t0 = time.monotonic()
    th.start()
    r = creates("create-evicting-paced", secs)
    stop.set()
    th.join()
    return r, got["n"] / (time.monotonic() - t0), got["n"]


def partitioning(n):
    """One day of n records: DROP of its partition against DELETE in
    batches (time, WAL); and the unique constraint partitioning allows."""
    psql("CREATE TABLE part_keys (LIKE idempotency_keys INCLUDING DEFAULTS)"
         " PARTITION BY RANGE (expires_at)")
    psql("CREATE TABLE part_keys_d0 PARTITION OF part_keys FOR VALUES FROM "
         "(now() - interval '2 days') TO (now() - interval '1 hour')")
    psql("CREATE TABLE part_keys_rest PARTITION OF part_keys DEFAULT")
    psql("CREATE INDEX ON part_keys (expires_at)")
    try:
        psql("ALTER TABLE part_keys ADD UNIQUE (api_key_id, key)")
        unique = "accepted"
    except RuntimeError as e:
        unique = "refused: " + str(e).strip().splitlines()[-1][:160]
    psql("ALTER TABLE part_keys ADD UNIQUE (api_key_id, key, expires_at)")
    exp = "now() - interval '1 day' + (g %% %d) * interval '1 second'" % DAY
    fill("part_keys", 1, n, "now() - interval '8 days'", exp)
    psql("CHECKPOINT")
    w0, t0 = wal_lsn(), time.time()
    psql("DROP TABLE part_keys_d0")
    drop = (time.time() - t0, wal_lsn() - w0)
    psql("DROP TABLE part_keys")
    # The same day in the real table, deleted as eviction does.
    fill("idempotency_keys", 50000000, n, "now() - interval '8 days'", exp)
    psql("CHECKPOINT")
    w0, t0 = wal_lsn(), time.time()
    out = subprocess.run([os.path.join(A.builddir, "apps/idemctl/idemctl"),
                          "-c", A.conf, "evict", "--batch", "10000"],
                         capture_output=True, text=True).stdout
    delete = (time.time() - t0, wal_lsn() - w0)
    m = re.search(r"evicted (\d+) keys", out)
    return unique, drop, delete, int(m.group(1)) if m else 0


def main():
    global A
    ap = argparse.ArgumentParser()
    for o in ("--conninfo", "--conf", "--builddir", "--srcdir", "--tmp"):
        ap.add_argument(o, required=True)
    for o in ("--rows", "--secs", "--clients"):
        ap.add_argument(o, type=int, required=True)
    A = ap.parse_args()
    A.tenant = psql("SELECT max(id) FROM api_keys")
    A.hash = psql("SELECT encode(secret_hash, 'hex') FROM api_keys "
                  "WHERE id = %s" % A.tenant)
    res = {}
    say("# store-scale: %d records, %d s per run, %d clients"
        % (A.rows, A.secs, A.clients))

    say("1. creates on the empty store")
    creates("warm", 5)
    res["empty"] = creates("create-empty")

    say("2. the fill")
    t0 = time.time()
    live = "now() - (g %% %d) * interval '%f seconds'" % (A.rows, 7.0 * DAY /
                                                          A.rows)
    fill("idempotency_keys", 1, A.rows, live, "(%s) + interval '7 days'"
         % live)
    backlog = A.rows // 7
    dead = "now() - interval '8 days' + (g %% %d) * interval '%f seconds'" % (
        backlog, float(DAY) / backlog)
    fill("idempotency_keys", A.rows + 1, backlog, dead,
         "(%s) + interval '7 days'" % dead)
    psql("VACUUM ANALYZE idempotency_keys")
    res["fill_s"] = time.time() - t0
    total = int(psql("SELECT count(*) FROM idempotency_keys"))
    res["rows"] = total
    res["bytes"] = int(psql("SELECT pg_total_relation_size("
                            "'idempotency_keys')"))
    res["heap"] = int(psql("SELECT pg_relation_size('idempotency_keys')"))
    say("  %d rows in %.0f s: %.0f MB, %.0f bytes per key (heap %.0f)"
        % (total, res["fill_s"], res["bytes"] / 1e6, res["bytes"] / total,
           res["heap"] / total))

    say("3. the scrape")
    res["gauges_ms"] = timed("SELECT * FROM idem_store_gauges()", 50)
    res["old_ms"] = timed(
        "SELECT coalesce(extract(epoch FROM now() - min(created_at) FILTER "
        "(WHERE expires_at > now())), 0), coalesce(extract(epoch FROM now() "
        "- min(expires_at) FILTER (WHERE expires_at <= now())), 0), "
        "count(*) FILTER (WHERE state = 'in_progress'), count(*) FILTER "
        "(WHERE state = 'in_progress' AND recovery_point <> 'started' AND "
        "expires_at <= now()) FROM idempotency_keys", 5)
    res["scrape_ms"] = scrape_app()
    say("  idem_store_gauges() %.2f ms; the old aggregates %.1f ms; "
        "GET /metrics %.2f ms" % (res["gauges_ms"], res["old_ms"],
                                  res["scrape_ms"]))

    say("4. creates on the full store")
    w0 = wal_lsn()
    res["full"] = creates("create-full")
    res["wal_write"] = (wal_lsn() - w0) / max(res["full"]["n"], 1)
    say("  WAL per create %.0f bytes (key record, payment row, commit)"
        % res["wal_write"])

    say("5. creates while eviction works the backlog off, paced as the "
        "janitor does (25 % of the time), then flat out (idemctl evict)")
    r, rate, n = evict_paced_during_creates(A.secs)
    res["paced"], res["paced_rate"], res["paced_n"] = r, rate, n
    say("  paced: evicted %d keys at %.0f keys/s, create p99 %.2f ms"
        % (n, rate, r["p99"]))
    r, rate, n = evict_during_creates(A.secs)
    res["evicting"], res["evict_rate"], res["evicted"] = r, rate, n
    say("  evicted %d keys at %.0f keys/s" % (n, rate))
    # Right after eviction: the dead index entries it left are stepped over.
    res["gauges_after_ms"] = timed("SELECT * FROM idem_store_gauges()", 50)
    say("  idem_store_gauges() after eviction %.2f ms"
        % res["gauges_after_ms"])

    say("6. a mass eviction: one expired day, then the gauges at once")
    mass_n = max(A.rows // 7, min(A.rows, 1000000))
    res["mass"] = mass = mass_eviction(mass_n)
    say("  evicted %d keys in %.1f s (%.0f keys/s)%s" % (
        mass["n"], mass["secs"], mass["n"] / max(mass["secs"], 1e-9),
        "; A VACUUM RAN BEFORE THE SCRAPE" if mass["vacuumed"] else
        ", no vacuum before the scrape"))
    say("  idem_store_gauges() right after: first %.2f ms, then %.2f ms; "
        "the 006 queries: first %.2f ms, then %.2f ms" % (
            mass["new"] + mass["old"]))
    say("  pages read (EXPLAIN BUFFERS, after): the gauges %d, the 006 "
        "queries %d" % tuple((mass["bufs"] + [-1, -1])[:2]))

    say("7. partitioning against batched DELETE")
    part_n = min(A.rows // 7, 1000000)
    unique, drop, delete, deleted = partitioning(part_n)
    res["part"] = (part_n, unique, drop, delete, deleted)
    res["wal_evict"] = delete[1] / max(deleted, 1)
    say("  UNIQUE (api_key_id, key) on a table partitioned by expires_at: %s"
        % unique)
    say("  %d keys: DROP partition %.3f s, %d bytes WAL; batched DELETE "
        "%.1f s, %.0f bytes WAL per key (%d)" % (part_n, drop[0], drop[1],
                                                 delete[0], delete[1] /
                                                 max(deleted, 1), deleted))

    e, f, v = res["empty"], res["full"], res["evicting"]
    say("\n| measure | value | target |\n|---|---|---|")
    say("| records in the store (7-day spread + 1 day expired) | %d | 10 M |"
        % res["rows"])
    say("| fill time | %.0f s | |" % res["fill_s"])
    say("| bytes per key (table + indexes + TOAST) | %.0f | |"
        % (res["bytes"] / res["rows"]))
    say("| creates, empty store | %.0f/s, p99 %.2f ms | |" % (e["tps"],
                                                          e["p99"]))
    say("| creates, full store | %.0f/s (%.2f x), p99 %.2f ms (%.2f x) | "
        ">= 0.9 x |" % (f["tps"], f["tps"] / e["tps"], f["p99"],
                        f["p99"] / e["p99"]))
    pc = res["paced"]
    say("| creates while the janitor's pace evicts (25 %% of the time) | "
        "%.0f/s, p99 %.2f ms (%.2f x full); %.0f keys/s evicted | "
        "p99 <= 1.5 x |" % (pc["tps"], pc["p99"], pc["p99"] / f["p99"],
                            res["paced_rate"]))
    say("| creates while evicting flat out | %.0f/s, p99 %.2f ms (%.2f x "
        "full) | |" % (v["tps"], v["p99"], v["p99"] / f["p99"]))
    say("| eviction rate while creating | %.0f keys/s (%d keys) | |"
        % (res["evict_rate"], res["evicted"]))
    say("| WAL per key written (with its payment row) | %.0f bytes | |"
        % res["wal_write"])
    say("| WAL per key evicted | %.0f bytes | |" % res["wal_evict"])
    say("| store gauges, idem_store_gauges(), with the backlog | %.2f ms | "
        "< 10 ms |"
        % res["gauges_ms"])
    say("| store gauges right after eviction | %.2f ms | < 10 ms |"
        % res["gauges_after_ms"])
    mass = res["mass"]
    say("| mass eviction (`idemctl evict`, autovacuum off) | %d keys in "
        "%.1f s (%.0f keys/s) | |" % (mass["n"], mass["secs"], mass["n"] /
                                      max(mass["secs"], 1e-9)))
    pm = ["PASS" if x < 10 else "MISS" for x in mass["new"]]
    say("| store gauges right after the mass eviction%s | first %.2f ms "
        "(%s), then %.2f ms (mean of 49: %s) | < 10 ms |" % (
            " (a vacuum ran first)" if mass["vacuumed"] else "",
            mass["new"][0], pm[0], mass["new"][1], pm[1]))
    say("| the same, as sql/006 ran them (from the indexes' head) | first "
        "%.2f ms, then %.2f ms | |" % mass["old"])
    say("| pages the gauges read then (EXPLAIN BUFFERS): sql/012, sql/006 "
        "| %d, %d | |" % tuple((mass["bufs"] + [-1, -1])[:2]))
    say("| the old whole-table aggregates | %.1f ms | |" % res["old_ms"])
    say("| GET /metrics on [metrics] listen (median of 20) | %.2f ms | |"
        % res["scrape_ms"])
    say("| %d keys: DROP PARTITION vs batched DELETE | %.3f s, %d bytes WAL"
        " vs %.1f s, %.0f MB WAL | |" % (part_n, drop[0], drop[1],
                                         delete[0], delete[1] / 1e6))
    say("| UNIQUE (api_key_id, key) when partitioned | %s | must hold |"
        % unique.split(":")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
