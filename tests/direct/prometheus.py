#!/usr/bin/env python3
"""prometheus.py - the alerting rules of conf/idem-alerts.yml: promtool
checks them and runs their unit tests (tests/prometheus/), then a real
Prometheus (127.0.0.1 only, a temporary storage directory) scrapes a
running payments.fcgi on its [metrics] listen socket and evaluates them:
all quiet on a healthy store, IdemEvictionLagging and IdemUnfinishedKeys
pending once eviction is held off and a record is left unfinished, quiet
again after.  Its own database in the suite's cluster.  Prints TAP.
Usage: prometheus.py --builddir B --srcdir S --pghost SOCKDIR --pgport PORT
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from direct import remove_tmp, run_args, run_main  # noqa: E402
from direct import (App, Db, api_key, conf_text, done, free_port,  # noqa: E402
                    missing, check, wait_for, write)

RULES = "conf/idem-alerts.yml"
RULE_TESTS = "tests/prometheus/idem-alerts.test.yml"


def promtool_checks(srcdir):
    rules = os.path.join(srcdir, RULES)
    p = subprocess.run(["promtool", "check", "rules", rules],
                       capture_output=True, text=True)
    check.expect(p.returncode == 0 and "SUCCESS" in p.stdout,
                 "promtool check rules %s" % RULES, p.stdout + p.stderr)
    p = subprocess.run(["promtool", "test", "rules", RULE_TESTS],
                       cwd=srcdir, capture_output=True, text=True)
    check.expect(p.returncode == 0 and "SUCCESS" in p.stdout,
                 "promtool test rules %s" % RULE_TESTS, p.stdout + p.stderr)
    # Every alert has a unit test that expects it to fire.
    with open(rules) as f:
        alerts = set(re.findall(r"(?m)^\s*- alert: (\w+)", f.read()))
    with open(os.path.join(srcdir, RULE_TESTS)) as f:
        tested = f.read()
    for a in sorted(alerts):
        check.expect(re.search(r"alertname: %s\n\s+exp_alerts:\n\s+- exp_labels" % a,
                               tested) is not None, "%s has a firing test case" % a)
    return alerts


class Prometheus:
    def __init__(self, tmp, rules, target):
        self.port = free_port()
        self.dir = os.path.join(tmp, "prometheus")
        os.makedirs(self.dir)
        conf = os.path.join(self.dir, "prometheus.yml")
        write(conf, "global:\n  scrape_interval: 1s\n"
              "  evaluation_interval: 1s\n"
              "rule_files:\n  - %s\n"
              "scrape_configs:\n  - job_name: idem\n"
              "    static_configs:\n      - targets: ['%s']\n"
              % (rules, target))
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + conf,
             "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port],
            stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s"
                                        % (self.port, path), timeout=5) as r:
                return json.loads(r.read().decode())
        except (OSError, ValueError):
            return None

    def ready(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready"
                                        % self.port, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def alerts(self):
        """{alertname: state} of the active alerts, or None."""
        j = self.api("/api/v1/alerts")
        if j is None:
            return None
        return {a["labels"]["alertname"]: a["state"]
                for a in j["data"]["alerts"]}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def end_to_end(a, tmp, alerts):
    name = "idem_prom_%d" % os.getpid()
    d = Db(a.pghost, a.pgport, name)
    d.sql("CREATE DATABASE %s" % name, db="postgres")
    mport = free_port()
    conf = os.path.join(tmp, "app.ini")
    write(conf, conf_text(a.pghost, a.pgport, name,
                          "[idempotency]\nevict_interval = 1s\n"
                          "[metrics]\nlisten = 127.0.0.1:%d\n" % mport))
    prom = app = hold = None
    try:
        api_key(a.builddir, a.srcdir, conf, "prometheus")
        tenant = d.sql("SELECT max(id) FROM api_keys")
        app = App(a.builddir, conf, os.path.join(tmp, "app.sock"),
                  os.path.join(tmp, "app.log"))
        prom = Prometheus(tmp, os.path.join(a.srcdir, RULES),
                          "127.0.0.1:%d" % mport)
        check.expect(wait_for(prom.ready, 30, 0.2), "Prometheus is ready on "
                     "127.0.0.1:%d" % prom.port)

        def target_up():
            j = prom.api("/api/v1/targets")
            t = j and j["data"]["activeTargets"]
            return bool(t) and t[0]["health"] == "up"
        check.expect(wait_for(target_up, 30, 0.2), "it scrapes the app's [metrics] "
                     "listen socket")

        def rules_evaluated():
            j = prom.api("/api/v1/rules")
            rs = [r for g in (j or {}).get("data", {}).get("groups", [])
                  for r in g["rules"]]
            return len(rs) == len(alerts) and all(
                r["health"] == "ok" and r.get("lastEvaluation", "")
                [:4] not in ("", "0001") for r in rs) and rs
        rs = wait_for(rules_evaluated, 30, 0.2)
        check.expect(bool(rs), "all %d rules evaluate without error" % len(alerts),
                     prom.api("/api/v1/rules"))
        # The janitor's first run comes an evict_interval after start.
        def positive(metric):
            j = prom.api("/api/v1/query?query=" + metric)
            return bool(j and j["data"]["result"]) and \
                float(j["data"]["result"][0]["value"][1]) > 0
        check.expect(wait_for(lambda: positive("idem_janitor_last_success_timestamp"
                                               "_seconds"), 20, 0.2),
                     "the janitor's heartbeat reaches Prometheus")
        quiet = wait_for(lambda: prom.alerts() == {}, 20, 0.2)
        check.expect(quiet, "a healthy store: no alert active", prom.alerts())

        # Eviction held off, a key expired an hour ago, one unfinished.
        hold = d.hold_eviction()
        d.sql("INSERT INTO idempotency_keys (api_key_id, key, "
              "request_method, request_path, request_fingerprint, state, "
              "response_status, created_at, expires_at) VALUES (%s, 'old', "
              "'POST', '/v1/payments', decode(repeat('ab', 32), 'hex'), "
              "'completed', 201, now() - interval '2 hours', "
              "now() - interval '1 hour')" % tenant)
        d.sql("INSERT INTO idempotency_keys (api_key_id, key, "
              "request_method, request_path, request_fingerprint, state, "
              "recovery_point, lease_until, created_at, expires_at) VALUES "
              "(%s, 'stuck', 'POST', '/v1/payments', decode(repeat('ab', "
              "32), 'hex'), 'in_progress', 'charged', now() + interval "
              "'1 hour', now() - interval '2 days', now() - interval "
              "'1 day')" % tenant)
        want = {"IdemEvictionLagging", "IdemUnfinishedKeys"}
        got = wait_for(lambda: set(prom.alerts() or {}) == want, 30, 0.2)
        check.expect(got, "eviction held off: IdemEvictionLagging and "
                     "IdemUnfinishedKeys become active, nothing else", prom.alerts())
        check.expect(got and all(s in ("pending", "firing")
                                 for s in prom.alerts().values()),
                     "as pending (their 'for' has not passed)", prom.alerts())
        hold.release()
        hold = None
        d.sql("DELETE FROM idempotency_keys WHERE key = 'stuck'")
        check.expect(wait_for(lambda: prom.alerts() == {}, 30, 0.2),
                     "evicted and completed: quiet again", prom.alerts())
        check.expect(d.sql("SELECT count(*) FROM idempotency_keys WHERE key = 'old'")
                     == "0", "the janitor evicted the old key once it could")
    finally:
        if hold is not None:
            hold.release()
        if prom is not None:
            prom.stop()
            check.expect(prom.proc.returncode is not None, "Prometheus stopped")
        if app is not None:
            app.stop()
        d.sql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % name, db="postgres")


def main():
    a = run_args()
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        missing("promtool and prometheus", "promtool/prometheus not "
                "installed (Debian package prometheus)")
        return done()
    tmp = tempfile.mkdtemp(prefix="idem-prometheus.")
    try:
        alerts = promtool_checks(a.srcdir)
        end_to_end(a, tmp, alerts)
    finally:
        remove_tmp(tmp)
    return done()


if __name__ == "__main__":
    sys.exit(run_main(main))
