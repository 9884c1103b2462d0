"""patroni.py - fixtures of the HA suite: one etcd member and Patroni-
managed PostgreSQL nodes, all on 127.0.0.1, remembered by process id and
stopped by Ha.cleanup() whatever happens.

Patroni (and so pg_ctl) refuses root: as root each node runs under
setpriv as the postgres user (setpriv execs, so the Popen pid is
Patroni's own).  A node's postmaster is not Patroni's child: cleanup
kills both, and the postmaster's orphaned backends, found by the
cluster name (the run's unique scope) in their process titles.

Standard library only (and PyYAML, which Patroni needs, to read the
sample): the node configs are written as JSON, which is YAML too.
"""

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from fx import SetupError, is_root, tail_lines, wait_until
from harness import children_of
from harness import DB, free_port, pid_running

# The settings of bootstrap.dcs that matter for idem: the suite takes them
# from conf/patroni.yml, so that the sample is what is tested.
DCS_KEYS = ("ttl", "loop_wait", "retry_timeout", "maximum_lag_on_failover",
            "synchronous_mode", "synchronous_mode_strict")


def sample_dcs(path):
    """DCS_KEYS of the sample's bootstrap.dcs (PyYAML comes with
    Patroni)."""
    import yaml
    with open(path) as f:
        dcs = yaml.safe_load(f)["bootstrap"]["dcs"]
    return {k: dcs[k] for k in DCS_KEYS}


def http_get(url, timeout=2.0):
    """(status, body) of a GET; status None when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ValueError):
        return None, b""


def _owned_dir(path, mode=0o700):
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)
    if is_root():
        shutil.chown(path, "postgres", "postgres")


def _proc_pids(match):
    """pids whose command line contains match (a run-unique string)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if match in cmd:
            out.append(int(d))
    return out


def children(pid):
    """pids of pid's direct children."""
    return children_of().get(pid, [])


def kill(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


class Etcd:
    """A single etcd member (the DCS); its v3 API on a loopback port."""

    def __init__(self, ha):
        self.dir = os.path.join(ha.tmp, "etcd")
        os.makedirs(self.dir, exist_ok=True)
        self.client = free_port()
        self.peer = free_port()
        self.log = os.path.join(self.dir, "etcd.log")
        self.proc = None
        self.ha = ha

    def start(self):
        exe = shutil.which("etcd")
        if exe is None:
            raise SetupError("etcd not found (Debian package etcd-server)")
        c = "http://127.0.0.1:%d" % self.client
        p = "http://127.0.0.1:%d" % self.peer
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [exe, "--name", "e1", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", c, "--advertise-client-urls", c,
             "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
             "--initial-cluster", "e1=" + p, "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.dir)
        log.close()
        self.ha.procs.append(self.proc)
        wait_until("etcd /health", lambda: self._up(), 20, 0.1)

    def _up(self):
        if self.proc.poll() is not None:
            raise SetupError("etcd exited %s" % self.proc.returncode)
        st, body = http_get("http://127.0.0.1:%d/health" % self.client)
        return st == 200 and b"true" in body


class Node:
    """One Patroni-managed PostgreSQL 15 node: REST API and PostgreSQL on
    their own loopback ports, a unix socket in the node's run dir."""

    def __init__(self, ha, name):
        self.ha = ha
        self.name = name
        self.dir = os.path.join(ha.tmp, name)
        self.data = os.path.join(self.dir, "data")
        self.run = os.path.join(self.dir, "run")
        self.conf = os.path.join(self.dir, "patroni.yml")
        self.log = os.path.join(self.dir, "patroni.log")
        self.port = free_port()
        self.api = free_port()
        self.proc = None
        self.killed = False     # on purpose: its exit is no setup error
        # psql as the superuser over TCP (pg_hba trusts loopback)
        self.db = DB("host=127.0.0.1 port=%d dbname=postgres user=postgres "
                     "connect_timeout=2" % self.port)

    def config(self):
        """The node's Patroni settings (conf/patroni.yml explains them)."""
        return {
            "scope": self.ha.scope,
            "name": self.name,
            "restapi": {"listen": "127.0.0.1:%d" % self.api,
                        "connect_address": "127.0.0.1:%d" % self.api},
            "etcd3": {"hosts": "127.0.0.1:%d" % self.ha.etcd.client},
            "bootstrap": {
                "dcs": dict(self.ha.dcs, postgresql={
                    "use_pg_rewind": True,
                    "parameters": {
                        "max_connections": 100,
                        "wal_level": "replica",
                        "hot_standby": "on",
                        "max_wal_senders": 10,
                        "max_replication_slots": 10,
                        "wal_keep_size": "128MB",
                        "wal_log_hints": "on",
                        # no machine crash is simulated (a kill -9 keeps
                        # the page cache): spare the 2 CPUs and the disk
                        "fsync": "off",
                        "full_page_writes": "off",
                    }}),
                "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}],
                "pg_hba": ["local all all trust",
                           "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
            },
            "postgresql": {
                "listen": "127.0.0.1:%d" % self.port,
                "connect_address": "127.0.0.1:%d" % self.port,
                "data_dir": self.data,
                "bin_dir": self.ha.bindir,
                "pgpass": os.path.join(self.run, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"}},
                "parameters": {"unix_socket_directories": self.run,
                               "log_min_messages": "warning"},
            },
            "watchdog": {"mode": "off", "safety_margin": -1},
            "log": {"level": "INFO"},
        }

    def write(self):
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        # Patroni creates data and socket dirs itself, but dies with
        # EACCES where postgres cannot write: make them its own first
        _owned_dir(self.run, 0o755)
        _owned_dir(self.data, 0o700)
        with open(self.conf, "w") as f:
            json.dump(self.config(), f, indent=1)
        os.chmod(self.conf, 0o644)
        open(self.log, "a").close()

    def start(self):
        exe = shutil.which("patroni")
        if exe is None:
            raise SetupError("patroni not found (Debian package patroni)")
        cmd = [exe, self.conf]
        env = dict(os.environ, HOME=self.run, PYTHONDONTWRITEBYTECODE="1")
        if is_root():
            cmd = ["setpriv", "--reuid=postgres", "--regid=postgres",
                   "--init-groups", "--"] + cmd
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=log, cwd=self.dir,
                                     env=env)
        log.close()
        self.ha.procs.append(self.proc)

    # --- state ----------------------------------------------------------
    def rest(self, path, timeout=1.0):
        return http_get("http://127.0.0.1:%d%s" % (self.api, path),
                        timeout)[0]

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_running(pid) else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        """kill -9 of the postmaster and Patroni, at once (a host
        crash, as far as loopback allows)."""
        self.killed = True
        pm = self.postmaster_pid()
        if self.proc is not None:
            kill(self.proc.pid)
        if pm is not None:
            kill(pm)
        if self.proc is not None:
            self.proc.wait(10)

    def stop(self):
        """SIGTERM Patroni (it stops its PostgreSQL); then make sure."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                kill(self.proc.pid)
                self.proc.wait(5)
        pm = self.postmaster_pid()
        if pm is not None:
            kill(pm)

    def tail(self, n=15):
        return tail_lines(self.log, n)


class Ha:
    """etcd and the Patroni nodes of one run."""

    def __init__(self, tmp, bindir, scope, dcs, nodes=3):
        self.tmp = tmp
        self.dcs = dcs
        self.bindir = bindir
        self.scope = scope
        self.procs = []
        self.etcd = Etcd(self)
        self.nodes = [Node(self, "n%d" % (i + 1)) for i in range(nodes)]

    def start(self, timeout=60):
        self.etcd.start()
        for n in self.nodes:
            n.write()
        for n in self.nodes:
            n.start()
        # either node may win the bootstrap: wait for any primary, then
        # for every replica streaming and a synchronous standby
        self.wait_healthy(len(self.nodes), timeout)

    def primary(self):
        """The node whose REST /primary answers 200 (None if none or
        more than one)."""
        ps = [n for n in self.nodes if n.alive() and n.rest("/primary") == 200]
        return ps[0] if len(ps) == 1 else None

    def sync_standby(self):
        """The synchronous standby in the DCS (what Patroni promotes),
        or None unless exactly one."""
        names = [m["name"] for m in self.members()
                 if m.get("role") == "sync_standby"]
        ss = [n for n in self.nodes if n.alive() and [n.name] == names]
        return ss[0] if ss else None

    def members(self):
        """Patroni's view, from any live node's /cluster."""
        for n in self.nodes:
            if not n.alive():
                continue
            st, body = http_get("http://127.0.0.1:%d/cluster" % n.api)
            if st == 200:
                return json.loads(body).get("members", [])
        return []

    def healthy(self, count):
        """count members running or streaming, one leader, one
        synchronous standby, and the leader writable."""
        ms = self.members()
        lead = [m for m in ms if m.get("role") == "leader"
                and m.get("state") == "running"]
        sync = [m for m in ms if m.get("role") == "sync_standby"
                and m.get("state") in ("streaming", "running")]
        up = [m for m in ms if m.get("state") in ("running", "streaming")]
        if len(lead) != 1 or len(sync) != 1 or len(up) < count:
            return False
        p = self.primary()
        return p is not None and p.db.scalar(
            "select pg_is_in_recovery()") == "f"

    def reported(self):
        """What Patroni reports, for telling progress from a stall: each
        node's REST /primary and /sync answers, and the members' roles,
        states and timelines."""
        rest = tuple((n.name, n.rest("/primary"), n.rest("/sync"))
                     for n in self.nodes if n.alive())
        ms = tuple(sorted((m.get("name"), m.get("role"), m.get("state"),
                           m.get("timeline")) for m in self.members()))
        return rest, ms

    def wait_healthy(self, count, quiet=60, cap=240):
        """Until healthy(count), and REST /primary and /sync each answer
        200 on exactly one node.  How long that takes is Patroni's
        business (its loop, elections, a replica's catch-up, all slower on
        a busy machine): the wait fails only when Patroni's reported state
        has not changed for quiet seconds, or after cap.  Returns the
        seconds waited."""
        t0 = last_t = time.monotonic()
        last = None
        while True:
            for n in self.nodes:
                if n.proc is not None and n.proc.poll() is not None and \
                        not n.killed:
                    raise SetupError("patroni %s exited %s: %s" % (
                        n.name, n.proc.returncode, " | ".join(n.tail(5))))
            state = self.reported()
            now = time.monotonic()
            rest = state[0]
            try:
                if sum(1 for r in rest if r[1] == 200) == 1 and \
                        sum(1 for r in rest if r[2] == 200) == 1 and \
                        self.healthy(count):
                    return now - t0
            except Exception:           # noqa: BLE001 - a node going away
                pass
            if state != last:
                last, last_t = state, now
            elif now - last_t > quiet or now - t0 > cap:
                raise SetupError(
                    "%d Patroni members, a leader and a synchronous standby "
                    "(REST /primary, /sync): not after %.0fs, Patroni's "
                    "reported state unchanged for %.0fs: %s"
                    % (count, now - t0, now - last_t, state))
            time.sleep(0.2)

    # The line PostgreSQL repeats on a replica left on the old timeline.
    DIVERGED = "forked off current database system timeline"

    def diverged(self):
        """Replicas left behind on the old timeline after a failover.
        Patroni 3.0.2 checks a running replica once, when it starts to
        follow the new primary, comparing the location it has *replayed*
        with the new timeline's switchpoint (postgresql/rewind.py,
        _check_timeline_and_lsn); a replica that had received WAL past the
        switchpoint but not yet replayed it (a busy machine) passes, replays
        it, and then cannot follow: PostgreSQL repeats "new timeline N
        forked off current database system timeline N-1 before current
        recovery point" and Patroni reports it running, unchanged, until
        an operator reinitialises it (patronictl reinit)."""
        return [n for n in self.nodes if not n.killed and
                any(self.DIVERGED in line for line in n.tail(30))]

    def patronictl(self, *args, timeout=60):
        """patronictl as root (it refuses nothing), against node 1's
        config (any node's names the same cluster)."""
        exe = shutil.which("patronictl")
        p = subprocess.run([exe, "-c", self.nodes[0].conf] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout,
                           env=dict(os.environ, HOME=self.tmp))
        return p.returncode, p.stdout.decode(errors="replace")

    def conninfo(self, dbname, extra=""):
        """The app's libpq multi-host conninfo: every node, writable
        only."""
        return ("host=%s port=%s dbname=%s user=postgres "
                "target_session_attrs=read-write %s" % (
                    ",".join("127.0.0.1" for _ in self.nodes),
                    ",".join(str(n.port) for n in self.nodes),
                    dbname, extra)).strip()

    def cleanup(self):
        problems = []
        for n in self.nodes:
            try:
                n.stop()
            except Exception as e:      # noqa: BLE001
                problems.append("stopping %s: %s" % (n.name, e))
        for p in self.procs:
            if p.poll() is None:
                kill(p.pid)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    problems.append("pid %d did not die" % p.pid)
        # orphans of a killed postmaster: process titles carry the
        # cluster name, which is this run's unique scope
        left = _proc_pids("postgres: %s: " % self.scope)
        for n in self.nodes:
            left += _proc_pids(n.data)
        for pid in set(left) - {os.getpid()}:
            kill(pid)
        deadline = time.monotonic() + 5
        while any(pid_running(p) for p in left) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        if any(pid_running(p) for p in left):
            problems.append("PostgreSQL processes survived SIGKILL")
        return problems


class PrimaryWatch:
    """Polls REST /primary of every node from start() on and records when
    Patroni first reported a primary other than old: the moment from which
    the product's own recovery is timed (the election before it is
    Patroni's)."""

    def __init__(self, ha, old):
        self.ha, self.old = ha, old
        self.t_reported = None
        self.node = None
        self.stop = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.th.start()
        return self

    def _run(self):
        while not self.stop.is_set():
            for n in self.ha.nodes:
                if n is not self.old and n.alive() and \
                        n.rest("/primary", 0.5) == 200:
                    self.t_reported, self.node = time.monotonic(), n
                    return
            self.stop.wait(0.05)

    def wait(self, cap=240):
        """The node reported (Patroni's election may take long on a busy
        machine: only cap bounds it)."""
        def seen():
            return self.t_reported is not None
        try:
            wait_until("Patroni reports a new primary (REST /primary)",
                       seen, cap, 0.05)
        finally:
            self.stop.set()
        return self.node
