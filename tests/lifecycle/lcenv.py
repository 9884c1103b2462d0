"""lcenv.py - what the lifecycle checks run against: the acquirer
simulator, lighttpd fixtures spawning payments.fcgi (bin-path, with their
own config file and environment), the databases, and helpers.

Standard library only.
"""

import http.client
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
import uuid

import httpc
from harness import DB, Failed, app_pids, free_port, pid_running, q
from harness import wait_until  # noqa: F401  (re-exported)

PAY = "/v1/payments"
ROUTE = "POST /v1/payments"
EVICT_LOCK = 7236491087         # lib/runtime/janitor.c: the fleet-wide lock
LOCK_TIMEOUT_S = 5.0            # [idempotency] lock_timeout of the fixtures
                                # (5 s, not 3: a retry within the lease after
                                # a crash and respawn, on a loaded machine)
REQUEST_TIMEOUT_S = 2.0         # [server] request_timeout (statement_timeout:
                                # 2 s, not 1, for a loaded machine; < lock_timeout)
DEADLINE_S = 2.0                # [route "POST /v1/payments"] deadline
POOL_SIZE = 3
# [inbox "acquirer"]'s secret (tests/lifecycle/inbox.py signs with it)
INBOX_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

DEFAULT = object()


def find_program(name):
    p = shutil.which(name)
    if p:
        return p
    for d in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        c = os.path.join(d, name)
        if os.access(c, os.X_OK):
            return c
    return None


def tail(path, n=30):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return lines[-n:]


def parse_metrics(text):
    """Prometheus text -> {"name{labels}": float}."""
    out = {}
    for ln in text.splitlines():
        if not ln.strip() or ln.startswith("#"):
            continue
        m = re.match(r'^([A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)$',
                     ln)
        if not m:
            raise Failed("metrics: cannot parse line %r" % ln)
        try:
            out[m.group(1)] = float(m.group(2))
        except ValueError:
            raise Failed("metrics: value of %r is not a number" % ln)
    return out


# --- the acquirer simulator ---

class Simulator:
    def __init__(self, script, logpath):
        self.logpath = logpath
        self.log = open(logpath, "ab")
        self.proc = subprocess.Popen(
            ["python3", script, "--port", "0"], stdout=subprocess.PIPE,
            stderr=self.log, stdin=subprocess.DEVNULL)
        line = b""
        deadline = time.monotonic() + 15
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise Failed("acquirer simulator did not start: %s"
                             % " | ".join(tail(logpath, 10)))
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                b = os.read(self.proc.stdout.fileno(), 1)
                if not b:
                    continue
                line += b
        m = re.match(rb"listening on ([\d.]+):(\d+)", line)
        if not m:
            raise Failed("acquirer simulator said %r" % line)
        self.host, self.port = m.group(1).decode(), int(m.group(2))
        self.url = "http://%s:%d" % (self.host, self.port)

    def call(self, method, path, doc=None):
        body = json.dumps(doc).encode() if doc is not None else None
        hs = [("Content-Type", "application/json")] if body else []
        r = httpc.http_request(self.host, self.port, method, path, body, hs,
                               timeout=10)
        if r.status != 200:
            raise Failed("acquirer simulator %s %s -> %s %r"
                         % (method, path, r.status, r.body[:200]))
        return r.json()

    def stats(self):
        return self.call("GET", "/stats")

    def control(self, mode, count=None):
        doc = {"mode": mode}
        if count is not None:
            doc["count"] = count
        return self.call("POST", "/control", doc)

    def release(self):
        """Answer every held call (mode hold); how many there were."""
        return self.call("POST", "/release")["released"]

    def by_reference(self, reference, stats=None):
        """The simulator's records (key, entry) naming this reference."""
        st = stats or self.stats()
        return [(k, v) for k, v in st["by_key"].items()
                if v.get("reference") == reference]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


# --- configs ---

def write_config(path, conninfo, appname, acquirer_url, evict_interval="1h",
                 metrics_allow=None, threads=3, deadline=DEADLINE_S,
                 lock_timeout=LOCK_TIMEOUT_S):
    lines = [
        "# generated for one lifecycle run",
        "[server]",
        "threads = %d" % threads,
        "request_timeout = %ds" % REQUEST_TIMEOUT_S,
        "log_level = info",
        "",
        "[database]",
        "conninfo = %s application_name=%s" % (conninfo, appname),
        "pool_size = %d" % POOL_SIZE,
        "acquire_timeout = 2s",
        "",
        "[idempotency]",
        "ttl = 24h",
        "lease = %ds" % lock_timeout,
        "evict_interval = %s" % evict_interval,
        "evict_batch = 10000",
        "",
    ]
    if metrics_allow is not None:
        lines += ["[metrics]", "allow = %s" % metrics_allow, ""]
    lines += [
        "[payments]",
        "acquirer_url = %s" % acquirer_url,
        "",
        # receivers on loopback (webhooks.py), retried within seconds
        "[webhooks]",
        "allow_private = on",
        "interval = 100ms",
        "backoff = 200ms",
        "backoff_max = 1s",
        "",
        # the acquirer's signed events (tests/lifecycle/inbox.py)
        '[inbox "acquirer"]',
        "scheme = standard-webhooks",
        "secret = %s" % INBOX_SECRET,
        "",
    ]
    # the acquirer call may take most of the deadline; the lease outlives it
    lines += route_section("%ds" % deadline)
    write_ini(path, lines)


def route_section(deadline):
    """The payments route's section of a config: its TTL and deadline
    (e.g. "2s")."""
    return ['[route "POST /v1/payments"]', "ttl = 7d",
            "deadline = %s" % deadline]


def write_ini(path, lines):
    """A config file of these lines, readable by the app's user."""
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o644)


def fresh(t, label, once=None):
    """What a check of one new payment starts from: (env, a new
    idempotency key, a payment body, the simulator's stats before); once:
    the simulator's mode for the next acquirer call only."""
    env = t.env
    key, body = env.new_key(label), env.payment_body(label)
    st0 = env.sim.stats()
    if once is not None:
        env.sim.control(once, count=1)
    return env, key, body, st0


# --- what the webhook checks (webhooks.py, inbox.py) start from ---

def subscribed_tenant(t, url, label):
    """A new tenant with a webhook endpoint at url for payment.succeeded,
    made through the main fixture: (tenant, the endpoint's JSON)."""
    env = t.env
    tenant = env.new_tenant(env.conf["main"], env.db, "lc-" + label)
    r = t.post("/v1/webhook_endpoints", {"url": url, "events": [
        "payment.succeeded"]}, key=env.new_key(label), token=tenant.secret)
    t.expect_status(r, 201)
    return tenant, r.json()


def tenant_payment(t, tenant, label):
    """A payment of tenant's, created (201): its id."""
    env = t.env
    r = t.post(PAY, env.payment_body(label), key=env.new_key(label),
               token=tenant.secret)
    t.expect_status(r, 201)
    return r.json()["id"]


# --- lighttpd + payments.fcgi ---

class Fixture:
    """lighttpd on 127.0.0.1:PORT spawning payments.fcgi -c CONF through
    bin-path (max-procs 1), with IDEM_FAULT in the app's environment when
    fault is given.  lighttpd restarts the app when it dies."""

    def __init__(self, name, tmp, app, conf, fault=None, app_env=None):
        self.name, self.app, self.conf, self.fault = name, app, conf, fault
        self.app_env = dict(app_env or {})     # more of the app's env
        self.dir = os.path.join(tmp, name)
        self.port = None
        self.proc = None
        self.log = os.path.join(self.dir, "lighttpd.log")    # + app stderr
        self.errlog = os.path.join(self.dir, "lighttpd-error.log")

    def start(self):
        lighttpd = find_program("lighttpd")
        if lighttpd is None:
            raise Failed("lighttpd is not installed")
        for d in ("www", "upload"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        env_line = ""
        app_env = dict(self.app_env)
        if self.fault:
            app_env["IDEM_FAULT"] = self.fault
        if app_env:
            env_line = ('\t"bin-environment" => ( %s ),\n' % ", ".join(
                '"%s" => "%s"' % kv for kv in sorted(app_env.items())))
        cfg = os.path.join(self.dir, "lighttpd.conf")
        with open(cfg, "w") as f:
            f.write(
                '# generated for one lifecycle run\n'
                'server.modules       = ( "mod_fastcgi" )\n'
                'server.bind          = "127.0.0.1"\n'
                'server.port          = %d\n'
                'server.document-root = "%s/www"\n'
                'server.errorlog      = "%s"\n'
                'server.upload-dirs   = ( "%s/upload" )\n'
                'server.max-request-size = 8192\n'
                'fastcgi.server = ( "/" => ((\n'
                '\t"bin-path"    => "%s -c %s",\n'
                '\t"socket"      => "%s/app.sock",\n'
                '\t"check-local" => "disable",\n'
                '\t"max-procs"   => 1,\n'
                '\t"fix-root-scriptname" => "enable",\n'
                '%s'
                ')))\n' % (self.port, self.dir, self.errlog, self.dir,
                           self.app, self.conf, self.dir, env_line))
        env = dict(os.environ)
        env.pop("IDEM_FAULT", None)     # only where the fixture says
        p = subprocess.run([lighttpd, "-tt", "-f", cfg],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=env)
        if p.returncode != 0:
            raise Failed("[%s] lighttpd rejects its config: %s"
                         % (self.name, p.stdout.decode(errors="replace")))
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([lighttpd, "-D", "-f", cfg],
                                     stdout=logf, stderr=logf,
                                     stdin=subprocess.DEVNULL, env=env)
        logf.close()

    def healthy(self):
        try:
            r = httpc.http_request("127.0.0.1", self.port, "GET", "/healthz",
                                   None, [], timeout=2)
            return r.status == 200
        except (OSError, http.client.HTTPException):
            return False

    def wait_ready(self, timeout=20):
        def ok():
            if self.proc is None or self.proc.poll() is not None:
                raise Failed("[%s] lighttpd exited: %s"
                             % (self.name, " | ".join(self.logs_tail(8))))
            return self.healthy()
        wait_until(ok, timeout, "[%s] GET /healthz -> 200" % self.name,
                   interval=0.1)

    def pids(self):
        """Running payments.fcgi processes spawned by this lighttpd."""
        if self.proc is None:
            return set()
        return {p for p in app_pids([self.proc.pid]) if pid_running(p)}

    def request(self, method, path, body=None, headers=(), timeout=20):
        return httpc.http_request("127.0.0.1", self.port, method, path, body,
                                  list(headers), timeout)

    def logs_tail(self, n=20):
        return ["%s: %s" % (os.path.basename(p), ln)
                for p in (self.log, self.errlog) for ln in tail(p, n)]

    def app_log_lines(self):
        """The app's JSON log lines (its stderr is lighttpd's)."""
        out = []
        for ln in tail(self.log, 100000):
            if ln.startswith("{"):
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    pass
        return out

    def stop(self):
        """SIGTERM lighttpd, then any app process left; None, or what had
        to be killed."""
        if self.proc is None:
            return None
        pids = self.pids()
        problem = None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problem = "lighttpd did not stop on SIGTERM"
        for p in pids:
            if pid_running(p):
                try:
                    os.kill(p, signal.SIGTERM)
                except OSError:
                    pass
        deadline = time.monotonic() + 10
        while any(pid_running(p) for p in pids) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in pids if pid_running(p)]
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if left:
            problem = ("payments.fcgi %s still running 10 s after SIGTERM; "
                       "killed" % left)
        self.proc = None
        return problem


# --- the environment the checks see ---

class Tenant:
    def __init__(self, name, secret, tid):
        self.name, self.secret, self.id = name, secret, tid


class Env:
    fixture = "lifecycle"

    def __init__(self, args):
        self.args = args
        self.srcdir, self.builddir = args.srcdir, args.builddir
        self.app = os.path.join(self.builddir, "apps/payments/payments.fcgi")
        self.idemctl = os.path.join(self.builddir, "apps/idemctl/idemctl")
        self.tmp = args.tmp
        self.run_id = uuid.uuid4().hex[:8]
        self.base_conninfo = args.pg
        self.dbname = "idem_lc_%s" % self.run_id
        self.fleet_dbname = "idem_lc_%s_fleet" % self.run_id
        self.conninfo = "%s dbname=%s" % (args.pg, self.dbname)
        self.fleet_conninfo = "%s dbname=%s" % (args.pg, self.fleet_dbname)
        self.admin = DB(args.pg)
        self.db = DB(self.conninfo)
        self.fleet_db = DB(self.fleet_conninfo)
        self.sim = None
        self.fx = {}
        self.dbs_created = []
        self.seq = 0
        self.conf = {}
        self.fault_injection = self.detect_fault_injection()

    # --- capabilities (harness) ---
    def has(self, cap):
        if cap == "faults":
            return self.fault_injection is not False
        if cap == "pg_restart":
            return getattr(self, "pg_restart", None) is not None
        return cap in self.fx

    def why_not(self, cap):
        if cap == "faults":
            return ("payments.fcgi was built without --enable-fault-"
                    "injection: IDEM_FAULT is ignored, no worker can be "
                    "killed at a phase boundary")
        if cap == "pg_restart":
            return ("the PostgreSQL server was given (--pg): it is not "
                    "this run's to restart")
        return "fixture %s did not start" % cap

    def detect_fault_injection(self):
        """True when BUILDDIR's config.h has the crash switch
        (#define IDEM_FAULT_INJECTION, from --enable-fault-injection),
        False when it has not, None when there is no config.h."""
        try:
            with open(os.path.join(self.builddir, "config.h")) as f:
                text = f.read()
        except OSError:
            return None
        return re.search(r"^#define IDEM_FAULT_INJECTION\b", text,
                         re.M) is not None

    # --- setup / teardown ---
    def setup(self, say):
        for f in (self.app, self.idemctl):
            if not os.access(f, os.X_OK):
                raise Failed("not built: %s" % f)
        if find_program("lighttpd") is None:
            raise Failed("lighttpd is not installed")
        os.makedirs(self.tmp, exist_ok=True)
        os.chmod(self.tmp, 0o755)
        self.sim = Simulator(os.path.join(self.srcdir,
                                          "tests/acquirer/acquirer.py"),
                             os.path.join(self.tmp, "acquirer.log"))
        say("acquirer simulator on %s" % self.sim.url)
        for name in (self.dbname, self.fleet_dbname):
            self.admin.run("CREATE DATABASE %s" % name)
            self.dbs_created.append(name)
        c = self.conf
        c["main"] = os.path.join(self.tmp, "main.ini")
        write_config(c["main"], self.conninfo, "lc-main", self.sim.url)
        c["deny"] = os.path.join(self.tmp, "deny.ini")
        write_config(c["deny"], self.conninfo, "lc-deny", self.sim.url,
                     metrics_allow="10.9.9.9")
        for j in ("j1", "j2"):
            c[j] = os.path.join(self.tmp, j + ".ini")
            write_config(c[j], self.fleet_conninfo, "lc-" + j, self.sim.url,
                         evict_interval="1s")
        for conf in (c["main"], c["j1"]):
            out = self.ctl(conf, "migrate", "--dir",
                           os.path.join(self.srcdir, "sql"), "--dir",
                           os.path.join(self.srcdir, "apps", "payments",
                                        "sql"))
            if not re.match(r"\d+ migrations? applied", out):
                raise Failed("idemctl migrate said %r" % out)
        self.tenant = self.new_tenant(c["main"], self.db, "lc-a")
        self.bulk = self.new_tenant(c["main"], self.db, "lc-bulk")
        self.fleet_tenant = self.new_tenant(c["j1"], self.fleet_db, "lc-f")
        plan = [("main", c["main"], None), ("deny", c["deny"], None),
                ("f-bpc", c["main"], "before:payment_created"),
                ("f-apc", c["main"], "after:payment_created"),
                ("f-bch", c["main"], "before:charged"),
                ("f-ach", c["main"], "after:charged"),
                # the answer held after the commit (inbox.py)
                ("f-ast", c["main"], "stall-after:stored"),
                ("j1", c["j1"], None), ("j2", c["j2"], None)]
        if not self.has("faults"):
            say("no fault injection in this build: the crash checks skip")
            plan = [p for p in plan if p[2] is None]
        for name, conf, fault in plan:
            fx = Fixture(name, self.tmp, self.app, conf, fault)
            self.fx[name] = fx
            fx.start()
        for name, _, _ in plan:
            fx = self.fx[name]
            for attempt in range(3):
                try:
                    fx.wait_ready()
                    break
                except Failed:
                    # The port picked may have been taken meanwhile.
                    if attempt == 2 or fx.proc.poll() is None:
                        raise
                    fx.start()
            say("fixture %s on 127.0.0.1:%d%s" % (
                name, self.fx[name].port,
                " (IDEM_FAULT=%s)" % self.fx[name].fault
                if self.fx[name].fault else ""))

    def stop_fixtures(self):
        problems = []
        for name, fx in list(self.fx.items()):
            p = fx.stop()
            if p:
                problems.append("[%s] %s" % (name, p))
        return problems

    def teardown(self):
        lock = getattr(self, "fleet_lock", None)
        if lock is not None and lock.poll() is None:
            lock.kill()
            lock.wait()
        self.stop_fixtures()
        if self.sim is not None:
            self.sim.stop()
        for name in self.dbs_created:
            try:
                self.admin.run("DROP DATABASE IF EXISTS %s WITH (FORCE)"
                               % name)
            except Failed:
                pass

    # --- tools ---
    def ctl_run(self, conf, *args, timeout=120):
        """idemctl -c conf args, finished: the process, output captured."""
        return subprocess.run([self.idemctl, "-c", conf, *args],
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)

    def ctl(self, conf, *args):
        """idemctl's output; Failed when it exits non-zero."""
        p = self.ctl_run(conf, *args)
        if p.returncode != 0:
            raise Failed("idemctl %s exited %d: %s"
                         % (" ".join(args), p.returncode,
                            p.stderr.decode(errors="replace").strip()))
        return p.stdout.decode()

    def new_tenant(self, conf, db, label):
        name = "%s-%s" % (label, self.run_id)
        out = self.ctl(conf, "api-key", "create", name)
        lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
        if not lines:
            raise Failed("idemctl api-key create printed nothing")
        tid = int(db.scalar("select id from api_keys where name = %s"
                            % q(name)))
        return Tenant(name, lines[-1], tid)

    def new_key(self, label):
        self.seq += 1
        return "lc-%s-%s-%d" % (label, self.run_id, self.seq)

    def payment_body(self, label, **over):
        b = {"amount": 1234, "currency": "eur",
             "description": "lc %s %s %d" % (label, self.run_id, self.seq)}
        b.update(over)
        return b

    # --- requests (T wraps request/post/get and remembers the last) ---
    def request(self, method, path, body=None, key=None, fx="main",
                token=DEFAULT, headers=None, timeout=20):
        hs = []
        if token is DEFAULT:
            token = self.tenant.secret
        if token is not None:
            hs.append(("Authorization", "Bearer " + token))
        if key is not None:
            hs.append(("Idempotency-Key", key))
        data = None
        if body is not None:
            data = (body if isinstance(body, bytes) else
                    json.dumps(body, separators=(",", ":")).encode())
            hs.append(("Content-Type", "application/json"))
        elif method == "POST":
            data = b""
        hs.extend(headers or ())
        return self.fx[fx].request(method, path, data, hs, timeout)

    def post(self, path, body, key=None, **kw):
        return self.request("POST", path, body, key=key, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    # --- the store ---
    def record(self, key, tenant=None):
        """The key's idempotency_keys row, or None; age: seconds since
        locked_at (None when unleased), by the database's clock."""
        tenant = tenant or self.tenant
        rows = self.db.rows(
            "select id, state, recovery_point, locked_at is not null "
            "as leased, extract(epoch from clock_timestamp() - locked_at)"
            "::float8 as age, response_status, locked_at::text as locked_at,"
            " (expires_at <= now()) as expired "
            "from idempotency_keys where api_key_id = %d and key = %s"
            % (tenant.id, q(key)))
        return rows[0] if rows else None

    def payments_described(self, description):
        return self.db.rows(
            "select id, status, acquirer_charge, acquirer_status, "
            "idem_key_id, amount from payments where description = %s "
            "order by seq" % q(description))

    def metrics(self, fx="main"):
        r = self.get("/metrics", fx=fx, token=None)
        if r.status != 200:
            raise Failed("[%s] GET /metrics -> %s: %r"
                         % (fx, r.status, r.body[:200]))
        return parse_metrics(r.body.decode())
