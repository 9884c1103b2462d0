"""fx.py - fixtures of the fault tests: private PostgreSQL clusters (a
primary, optionally a synchronous standby), the app (payments.fcgi) and
lighttpd in front of it.  Every process started here is remembered by its
id and stopped by Fixtures.cleanup(), whatever happens.

Standard library only.  As root, PostgreSQL runs as the postgres user
(initdb refuses root) through runuser.
"""

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from harness import DB, free_port, pid_running, q


class SetupError(Exception):
    pass


def is_root():
    return os.geteuid() == 0


def wait_until(what, cond, timeout, interval=0.05):
    """Poll cond() until it returns something true; SetupError after
    timeout seconds.  Returns cond's value."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:     # noqa: BLE001 - reported on timeout
            last = e
        if time.monotonic() >= deadline:
            raise SetupError("%s: not within %.0fs%s" % (
                what, timeout, " (last error: %s)" % last if last else ""))
        time.sleep(interval)


def tail_lines(path, n):
    """The last n lines of a log file; [] when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()[-n:]
    except OSError:
        return []


def pg_bindir():
    d = os.environ.get("PG_BINDIR")
    if d and os.access(os.path.join(d, "pg_ctl"), os.X_OK):
        return d
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                   key=lambda p: int(p.split("/")[-2])
                   if p.split("/")[-2].isdigit() else 0, reverse=True)
    for d in cands:
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return d
    w = shutil.which("pg_ctl")
    if w:
        return os.path.dirname(w)
    raise SetupError("PostgreSQL server binaries not found; set PG_BINDIR")


def lighttpd_bin():
    w = shutil.which("lighttpd")
    if w:
        return w
    for d in ("/usr/sbin", "/usr/local/sbin"):
        p = os.path.join(d, "lighttpd")
        if os.access(p, os.X_OK):
            return p
    raise SetupError("lighttpd not found")


class Cluster:
    """A private PostgreSQL cluster on a unix socket only."""

    def __init__(self, fx, name, extra=""):
        self.fx = fx
        self.name = name
        self.bindir = fx.pg_bindir
        self.dir = os.path.join(fx.tmp, name)
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "run")
        self.log = os.path.join(self.dir, "postgres.log")
        self.port = free_port()
        self.extra = extra
        self.running = False
        self.conninfo = ("host=%s port=%d dbname=postgres user=postgres"
                         % (self.sock, self.port))
        self.db = DB(self.conninfo)

    def _as_pg(self, args, timeout=120, check=True):
        cmd = list(args)
        if is_root():
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout,
                           cwd=self.fx.tmp)
        if check and p.returncode != 0:
            raise SetupError("%s failed (%d): %s" % (
                os.path.basename(args[0]), p.returncode,
                p.stdout.decode(errors="replace")[-1500:]))
        return p

    def _dirs(self, data_too=True):
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        for d, mode in ((self.sock, 0o755),) + (((self.data, 0o700),)
                                                 if data_too else ()):
            os.makedirs(d, exist_ok=True)
            os.chmod(d, mode)
            if is_root():
                shutil.chown(d, "postgres", "postgres")
        # the log file is written by the server
        open(self.log, "a").close()
        if is_root():
            shutil.chown(self.log, "postgres", "postgres")

    def settings(self):
        return """
# --- private fault-test cluster ---
listen_addresses = ''
port = %d
unix_socket_directories = '%s'
max_connections = 100
fsync = off
full_page_writes = off
log_min_messages = warning
log_line_prefix = '%%m [%%p] '
%s
""" % (self.port, self.sock, self.extra)

    def init(self):
        self._dirs()
        self._as_pg([os.path.join(self.bindir, "initdb"), "-D", self.data,
                     "-U", "postgres", "-A", "trust", "-E", "UTF8",
                     "--locale=C.UTF-8", "--no-sync"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(self.settings())
        self.fx.clusters.append(self)

    def init_standby_of(self, primary, app_name):
        """pg_basebackup -R from primary; this cluster's own socket/port."""
        self._dirs()
        self._as_pg([os.path.join(self.bindir, "pg_basebackup"),
                     "-D", self.data, "-h", primary.sock,
                     "-p", str(primary.port), "-U", "postgres", "-R",
                     "-X", "stream", "-c", "fast", "--no-sync"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(self.settings())
            f.write("cluster_name = '%s'\n" % app_name)
        self.fx.clusters.append(self)

    def pg_ctl(self, *args, timeout=90, check=True):
        return self._as_pg([os.path.join(self.bindir, "pg_ctl"), "-D",
                            self.data, "-l", self.log] + list(args),
                           timeout=timeout, check=check)

    def start(self):
        self.pg_ctl("-w", "-t", "60", "start")
        self.running = True
        wait_until("PostgreSQL %s accepts queries" % self.name,
                   lambda: self.db.scalar("select 1") == "1", 30, 0.1)

    def stop(self, mode="fast", check=True):
        if not self.running:
            return
        self.pg_ctl("-m", mode, "-w", "-t", "60", "stop", check=check)
        self.running = False

    def restart(self, mode="fast"):
        self.pg_ctl("-m", mode, "-w", "-t", "60", "restart")
        self.running = True

    def promote(self):
        self.pg_ctl("-w", "-t", "60", "promote")

    def cleanup(self):
        if self.running or os.path.exists(os.path.join(self.data,
                                                       "postmaster.pid")):
            p = self.pg_ctl("-m", "immediate", "-w", "-t", "30", "stop",
                            check=False, timeout=40)
            self.running = False
            return p.returncode == 0
        return True

    def tail(self, n=20):
        return tail_lines(self.log, n)


class Stack:
    """payments.fcgi behind lighttpd.

    mode "socket": the test starts "payments.fcgi -c CONF -l unix:SOCK"
    itself (stderr to app.log) and lighttpd connects to SOCK;
    mode "spawn": lighttpd starts the app (bin-path) and restarts it when
    it dies; the app's stderr goes to lighttpd's server.errorlog.
    """

    def __init__(self, fx, name, conninfo, mode="socket", threads=8,
                 pool_size=8, acquire_timeout="2s", request_timeout="10s",
                 env=None):
        self.fx = fx
        self.name = name
        self.mode = mode
        self.dir = os.path.join(fx.tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.conf = os.path.join(self.dir, "payments.ini")
        self.sock = os.path.join(self.dir, "app.sock")
        self.app_log = os.path.join(self.dir, "app.log")
        self.lt_conf = os.path.join(self.dir, "lighttpd.conf")
        self.lt_log = os.path.join(self.dir, "lighttpd.log")
        self.lt_err = os.path.join(self.dir, "lighttpd-error.log")
        self.port = free_port()
        self.host = "127.0.0.1"
        self.app = None         # Popen (socket mode)
        self.lt = None          # Popen
        self.env = dict(os.environ, **fx.app_env)
        self.env.update(env or {})
        self.settings = dict(threads=threads, pool_size=pool_size,
                             acquire_timeout=acquire_timeout,
                             request_timeout=request_timeout)
        with open(self.conf, "w") as f:
            f.write("""# generated for one fault-test scenario
[server]
threads = %(threads)d
max_body = 1MiB
request_timeout = %(request_timeout)s
log_level = info

[database]
conninfo = %(conninfo)s
pool_size = %(pool_size)d
acquire_timeout = %(acquire_timeout)s

[idempotency]
ttl = 24h
lease = 5m

[route "POST /v1/payments"]
ttl = 7d
""" % dict(self.settings, conninfo=conninfo))
        os.chmod(self.conf, 0o644)
        fx.stacks.append(self)

    # --- lighttpd -------------------------------------------------------------
    def _write_lighttpd(self):
        os.makedirs(os.path.join(self.dir, "www"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "upload"), exist_ok=True)
        if self.mode == "spawn":
            backend = ('"bin-path" => "%s -c %s",\n\t"socket" => "%s",\n'
                       '\t"max-procs" => 1,\n'
                       % (self.fx.app_bin, self.conf, self.sock))
            if self.fx.app_env:
                backend += '\t"bin-environment" => ( %s ),\n' % ", ".join(
                    '"%s" => "%s"' % kv for kv in self.fx.app_env.items())
        else:
            backend = '"socket" => "%s",\n' % self.sock
        with open(self.lt_conf, "w") as f:
            f.write("""# generated for one fault-test scenario
server.modules       = ( "mod_fastcgi" )
server.bind          = "127.0.0.1"
server.port          = %d
server.document-root = "%s/www"
server.errorlog      = "%s"
server.upload-dirs   = ( "%s/upload" )
server.max-request-size = 8192
server.max-connections  = 1024
server.max-keep-alive-idle = 30
server.max-keep-alive-requests = 100000
fastcgi.server = ( "/" => ((
	%s	"check-local" => "disable",
	"fix-root-scriptname" => "enable",
)))
""" % (self.port, self.dir, self.lt_err, self.dir, backend))

    def app_pids(self):
        """pids of payments.fcgi processes of this stack."""
        from harness import app_pids
        roots = [p.pid for p in (self.app, self.lt) if p is not None]
        return app_pids(roots)

    def start_app(self):
        """(socket mode) start payments.fcgi -l unix:SOCK."""
        assert self.mode == "socket"
        try:
            os.unlink(self.sock)
        except FileNotFoundError:
            pass
        log = open(self.app_log, "ab")
        self.app = subprocess.Popen(
            [self.fx.app_bin, "-c", self.conf, "-l", "unix:" + self.sock],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env,
            cwd=self.dir)
        log.close()
        self.fx.procs.append(self.app)
        wait_until("payments.fcgi listens on its socket",
                   lambda: self._sock_ok() or self._app_died(), 20)
        if self.app.poll() is not None:
            raise SetupError("payments.fcgi exited %s: %s" % (
                self.app.returncode, self.log_tail()))

    def _app_died(self):
        return self.app is not None and self.app.poll() is not None

    def _sock_ok(self):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(self.sock)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def start(self):
        if self.mode == "socket":
            self.start_app()
        self._write_lighttpd()
        lb = self.fx.lighttpd
        p = subprocess.run([lb, "-tt", "-f", self.lt_conf],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30)
        if p.returncode != 0:
            raise SetupError("lighttpd rejects its config: %s"
                             % p.stdout.decode(errors="replace"))
        log = open(self.lt_log, "ab")
        self.lt = subprocess.Popen([lb, "-D", "-f", self.lt_conf],
                                   stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=log, env=self.env, cwd=self.dir)
        log.close()
        self.fx.procs.append(self.lt)
        self.wait_healthy(30)

    def healthz(self, timeout=5):
        from hc import Client
        return Client(self.host, self.port, keepalive=False).request(
            "GET", "/healthz", timeout=timeout)

    def wait_healthy(self, timeout):
        def ok():
            if self.lt.poll() is not None:
                raise SetupError("lighttpd exited %s" % self.lt.returncode)
            return self.healthz().status == 200
        wait_until("GET /healthz -> 200 through lighttpd (%s)" % self.name,
                   ok, timeout, 0.1)

    def stop_app(self, timeout=10):
        """SIGTERM the app (socket mode); SIGKILL after timeout.  Returns
        None, or a description of what went wrong."""
        if self.app is None or self.app.poll() is not None:
            return None
        self.app.send_signal(signal.SIGTERM)
        try:
            self.app.wait(timeout)
            return None
        except subprocess.TimeoutExpired:
            self.app.kill()
            self.app.wait(5)
            return "payments.fcgi still running %ds after SIGTERM" % timeout

    def stop(self):
        problems = []
        pids = self.app_pids()
        if self.lt is not None and self.lt.poll() is None:
            self.lt.send_signal(signal.SIGTERM)
            try:
                self.lt.wait(10)
            except subprocess.TimeoutExpired:
                self.lt.kill()
                self.lt.wait(5)
                problems.append("lighttpd did not stop on SIGTERM")
        r = self.stop_app()
        if r:
            problems.append(r)
        # spawned app processes: lighttpd signals them; make sure
        deadline = time.monotonic() + 10
        for pid in pids:
            while pid_running(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_running(pid):
                problems.append("app pid %d still running; killed" % pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return problems

    def logs(self):
        """The files holding the app's stderr."""
        # spawned, the app inherits lighttpd's stderr (and may write to
        # its errorlog)
        return [self.app_log] if self.mode == "socket" else \
            [self.lt_log, self.lt_err]

    def log_text(self):
        out = []
        for p in self.logs():
            try:
                with open(p, errors="replace") as f:
                    out.append(f.read())
            except OSError:
                pass
        return "\n".join(out)

    def log_tail(self, n=15):
        return "\n".join(self.log_text().splitlines()[-n:])


class Fixtures:
    """The temp dir and everything started in it."""

    def __init__(self, srcdir, builddir, tmp):
        self.srcdir = srcdir
        self.builddir = builddir
        self.tmp = tmp
        self.app_bin = os.path.join(builddir, "apps", "payments",
                                    "payments.fcgi")
        self.idemctl_bin = os.path.join(builddir, "apps", "idemctl",
                                        "idemctl")
        for b in (self.app_bin, self.idemctl_bin):
            if not os.access(b, os.X_OK):
                raise SetupError("not built: %s" % os.path.relpath(
                    b, builddir))
        self.app_env = {}
        self.snapshot()
        if shutil.which("psql") is None:
            raise SetupError("psql not found")
        self.pg_bindir = pg_bindir()
        self.lighttpd = lighttpd_bin()
        self.clusters = []
        self.stacks = []
        self.procs = []

    # --- the build under test -------------------------------------------
    def snapshot(self):
        """Copy the programs (and libidem, for a libtool build) into the
        temp dir, so that a rebuild of BUILDDIR during the run cannot pull
        them away or mix two builds.  A libtool wrapper script is replaced
        by the real program in .libs/ and LD_LIBRARY_PATH."""
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        os.chmod(bindir, 0o755)
        libs = os.path.join(self.builddir, "lib", ".libs")

        def real(prog):
            with open(prog, "rb") as f:
                head = f.read(4096)
            if head.startswith(b"#!") and b"libtool" in head:
                cand = os.path.join(os.path.dirname(prog), ".libs",
                                    os.path.basename(prog))
                if os.access(cand, os.X_OK):
                    return cand, True
            return prog, False

        def sources():
            out = []
            for prog in (self.app_bin, self.idemctl_bin):
                out.append(real(prog))
            return out

        def stamp(paths):
            st = []
            for p in paths:
                s = os.stat(p)
                st.append((p, s.st_size, s.st_mtime_ns))
            return st

        for _ in range(60):
            srcs = sources()
            paths = [p for p, _ in srcs]
            if any(w for _, w in srcs) and os.path.isdir(libs):
                paths += sorted(glob.glob(os.path.join(libs, "libidem.so*")))
            before = stamp(paths)
            newest = max(m for _, _, m in before) / 1e9
            if time.time() - newest < 2:
                time.sleep(0.5)     # being rebuilt right now: wait
                continue
            for p in paths:
                dst = os.path.join(bindir, os.path.basename(p))
                if os.path.islink(p):
                    if os.path.lexists(dst):
                        os.unlink(dst)
                    os.symlink(os.readlink(p), dst)
                else:
                    shutil.copy2(p, dst)
            if stamp(paths) == before:
                break
        else:
            raise SetupError("the build kept changing; cannot snapshot it")
        self.app_bin = os.path.join(bindir, os.path.basename(srcs[0][0]))
        self.idemctl_bin = os.path.join(bindir,
                                        os.path.basename(srcs[1][0]))
        if any(w for _, w in srcs):
            self.app_env = {"LD_LIBRARY_PATH": bindir}

    # --- idemctl -------------------------------------------------------------
    def idemctl(self, conninfo, *args):
        conf = os.path.join(self.tmp, "idemctl-%d.ini" % (abs(hash(conninfo))
                                                         % 100000))
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write("[database]\nconninfo = %s\n" % conninfo)
        p = subprocess.run([self.idemctl_bin, "-c", conf] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30, env=dict(os.environ, **self.app_env))
        if p.returncode != 0:
            raise SetupError("idemctl %s: exit %d: %s" % (
                " ".join(args), p.returncode,
                p.stderr.decode(errors="replace").strip()))
        return p.stdout.decode()

    def migrate(self, cluster):
        self.idemctl(cluster.conninfo, "migrate", "--dir",
                     os.path.join(self.srcdir, "sql"), "--dir",
                     os.path.join(self.srcdir, "apps", "payments", "sql"))

    def tenant(self, cluster, name):
        """(secret, id) of a new API key."""
        out = self.idemctl(cluster.conninfo, "api-key", "create", name)
        lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
        if not lines:
            raise SetupError("idemctl api-key create printed nothing")
        tid = cluster.db.int("select id from api_keys where name = %s"
                             % q(name))
        return lines[-1], tid

    # --- cleanup -----------------------------------------------------------
    def cleanup(self):
        problems = []
        for st in reversed(self.stacks):
            try:
                problems += st.stop()
            except Exception as e:      # noqa: BLE001
                problems.append("stopping %s: %s" % (st.name, e))
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                    p.wait(5)
                except Exception:       # noqa: BLE001
                    pass
        for c in reversed(self.clusters):
            try:
                if not c.cleanup():
                    problems.append("pg_ctl stop failed for %s" % c.name)
            except Exception as e:      # noqa: BLE001
                problems.append("stopping %s: %s" % (c.name, e))
        return problems


def say(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
