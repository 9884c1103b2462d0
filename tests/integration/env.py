"""env.py - what the scenarios run against: one server fixture, the
database, tenants (API keys), and request functions."""

import itertools
import json
import shlex
import subprocess
import threading
import uuid

import httpc
from harness import DB, Failed, q, app_pids

NO_AUTH = object()      # token=NO_AUTH: send no Authorization header
DEFAULT = object()


class Tenant:
    def __init__(self, name, secret, tid):
        self.name, self.secret, self.id = name, secret, tid

    def __repr__(self):
        return "Tenant(%s, id=%s)" % (self.name, self.id)


class Env:
    def __init__(self, args):
        self.fixture = args.fixture
        self.host, port = args.base.rsplit(":", 1)
        self.port = int(port)
        self.db = DB(args.pg)
        self.idemctl = shlex.split(args.idemctl) if args.idemctl else None
        self.config = args.config
        self.fcgi_addr = args.fcgi or None
        self.root_pids = [int(p) for p in (args.app_root_pid or "").split(",")
                          if p.strip()]
        self.run_id = uuid.uuid4().hex[:10]
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self.tenants = {}
        for spec in args.tenant:
            label, name, secret = spec.split(":", 2)
            self.tenants[label] = Tenant(name, secret, self.tenant_id(name))
        if "a" not in self.tenants or "b" not in self.tenants:
            raise SystemExit("need --tenant a:NAME:SECRET and b:NAME:SECRET")
        self.a = self.tenants["a"]
        self.b = self.tenants["b"]
        self.db.tenants = tuple(x.id for x in self.tenants.values())

    # --- capabilities ------------------------------------------------------
    def has(self, cap):
        if cap == "idemctl":
            return bool(self.idemctl and self.config)
        if cap == "fcgi":
            return bool(self.fcgi_addr)
        if cap == "pids":
            return bool(self.root_pids)
        return False

    def why_not(self, cap):
        return {
            "idemctl": "no --idemctl/--config given: cannot create or "
                       "revoke API keys",
            "fcgi": "this fixture gives no direct FastCGI address of the app",
            "pids": "no app process id known for this fixture",
        }.get(cap, "needs " + cap)

    # --- names ---------------------------------------------------------------
    def new_key(self, label="k"):
        with self._lock:
            n = next(self._seq)
        return "%s-%s-%d" % (label, self.run_id, n)

    def tenant_id(self, name):
        v = self.db.scalar("select id from api_keys where name = %s "
                           "order by id desc limit 1" % q(name))
        if not v:
            raise Failed("no api_keys row named %r" % name)
        return int(v)

    def idemctl_run(self, *args):
        if not self.has("idemctl"):
            raise Failed(self.why_not("idemctl"))
        p = subprocess.run(self.idemctl + ["-c", self.config] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=60)
        if p.returncode != 0:
            raise Failed("idemctl %s exited %d: %s"
                         % (" ".join(args), p.returncode,
                            p.stderr.decode(errors="replace").strip()))
        return p.stdout.decode()

    def new_tenant(self, label):
        name = "%s-%s-%s" % (self.fixture, label, self.run_id)
        out = self.idemctl_run("api-key", "create", name)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        if not lines:
            raise Failed("idemctl api-key create printed nothing")
        return Tenant(name, lines[-1].strip(), self.tenant_id(name))

    def revoke(self, tenant):
        self.idemctl_run("api-key", "revoke", tenant.name)

    def pids(self):
        return app_pids(self.root_pids)

    # --- requests --------------------------------------------------------------
    @staticmethod
    def encode_body(body):
        if body is None:
            return None
        if isinstance(body, (dict, list)):
            return json.dumps(body, separators=(",", ":")).encode()
        if isinstance(body, str):
            return body.encode("utf-8")
        return body

    def _headers(self, token, key, ctype, headers, has_body):
        hs = []
        if token is DEFAULT:
            token = self.a
        if isinstance(token, Tenant):
            token = token.secret
        if token is not NO_AUTH and token is not None:
            hs.append(("Authorization", "Bearer " + token))
        if key is not None:
            hs.append(("Idempotency-Key", key))
        if ctype is DEFAULT:
            ctype = "application/json" if has_body else None
        if ctype is not None:
            hs.append(("Content-Type", ctype))
        hs.extend(headers or ())
        return hs

    def request(self, method, path, body=None, token=DEFAULT, key=None,
                ctype=DEFAULT, headers=None, timeout=20):
        data = self.encode_body(body)
        hs = self._headers(token, key, ctype, headers, data is not None)
        if data is None and method in ("POST", "PUT", "PATCH"):
            data = b""
        return httpc.http_request(self.host, self.port, method, path, data,
                                  hs, timeout)

    def post(self, path, body, key=None, **kw):
        return self.request("POST", path, body, key=key, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def raw(self, data, timeout=20):
        return httpc.raw_request(self.host, self.port, data, timeout)

    def fcgi(self, params, stdin=b"", **kw):
        return httpc.fcgi_request(self.fcgi_addr, params, stdin, **kw)

    def fcgi_params(self, method, path, query="", body_len=None,
                    token=DEFAULT, key=None, ctype=DEFAULT, extra=None):
        """CGI params as lighttpd sends them ("/" prefix, root script name
        fixed), for a request on the app's own socket."""
        if token is DEFAULT:
            token = self.a
        if isinstance(token, Tenant):
            token = token.secret
        p = {
            "FCGI_ROLE": "RESPONDER",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_SOFTWARE": "idem-test",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_SCHEME": "http",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_ADDR": "127.0.0.1",
            "SERVER_PORT": "80",
            "REMOTE_ADDR": "127.0.0.1",
            "REMOTE_PORT": "40000",
            "REQUEST_METHOD": method,
            "REQUEST_URI": path + ("?" + query if query else ""),
            "DOCUMENT_URI": path,
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "HTTP_HOST": "127.0.0.1",
        }
        if body_len is not None:
            p["CONTENT_LENGTH"] = body_len
        if token is not NO_AUTH and token is not None:
            p["HTTP_AUTHORIZATION"] = "Bearer " + token
        if key is not None:
            p["HTTP_IDEMPOTENCY_KEY"] = key
        if ctype is DEFAULT:
            ctype = "application/json" if method == "POST" else None
        if ctype is not None:
            p["CONTENT_TYPE"] = ctype
        p.update(extra or {})
        return p

    # --- domain functions -----------------------------------------------------
    def payment_body(self, **over):
        b = {"amount": 1000, "currency": "usd",
             "description": "test " + self.run_id}
        b.update(over)
        return {k: v for k, v in b.items() if v is not None}

    def create_payment(self, tenant=DEFAULT, **over):
        """POST a payment that must succeed; returns (json, response)."""
        r = self.post("/v1/payments", self.payment_body(**over),
                      key=self.new_key("setup"), token=tenant)
        if r.status != 201:
            raise Failed("setup: creating a payment answered %s: %r"
                         % (r.status, r.body[:300]))
        return r.json(), r

    def payment_row(self, pid):
        rows = self.db.rows("select * from payments where id = %s" % q(pid))
        return rows[0] if rows else None

    def key_rows(self, tenant, key):
        return self.db.rows(
            "select request_method, request_path, state, response_status, "
            "extract(epoch from expires_at - created_at)::bigint as ttl_s "
            "from idempotency_keys where api_key_id = %d and key = %s"
            % (tenant.id, q(key)))

    def alive(self):
        """None when /healthz answers 200 and (if known) the app processes
        are the same as recorded by remember_pids(); else a reason."""
        try:
            r = self.get("/healthz", token=NO_AUTH, timeout=10)
        except Exception as e:
            return "GET /healthz failed: %s" % e
        if r.status != 200:
            return "GET /healthz answered %s" % r.status
        if self.root_pids and getattr(self, "known_pids", None):
            now = self.pids()
            if not self.known_pids <= now:
                return ("app process(es) %s gone (now %s): the worker "
                        "crashed or was restarted"
                        % (sorted(self.known_pids - now), sorted(now)))
        return None

    def remember_pids(self):
        if self.root_pids:
            self.known_pids = self.pids()
