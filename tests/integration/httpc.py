"""httpc.py - HTTP (http.client and raw sockets) and a minimal FastCGI client.

Standard library only.
"""

import http.client
import json
import socket
import struct


class Response:
    def __init__(self, status, reason, headers, body, via="http"):
        self.status = status
        self.reason = reason
        self.headers = headers      # list of (name, value), in order
        self.body = body            # bytes
        self.via = via

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def replayed(self):
        return (self.header("Idempotent-Replayed") or "").strip().lower() \
            == "true"

    # The types of the web servers' own error pages (conf/errors/*.json).
    SERVER_PAGE_TYPES = ("bad-request", "request-timeout", "length-required",
                         "payload-too-large", "uri-too-long",
                         "header-fields-too-large", "internal-error",
                         "bad-gateway", "service-unavailable",
                         "gateway-timeout", "http-version-not-supported")

    @property
    def is_server_page(self):
        """One of the sample configs' static problem pages: the web server
        answered, not the app (whose problems carry an instance)."""
        ct = (self.header("Content-Type") or "").split(";")[0].strip()
        if ct.lower() != "application/problem+json":
            return False
        try:
            doc = json.loads(self.body.decode("utf-8"))
        except ValueError:
            return False
        return isinstance(doc, dict) and "instance" not in doc and \
            str(doc.get("type", "")).rsplit("/", 1)[-1] in \
            self.SERVER_PAGE_TYPES

    @property
    def is_problem(self):
        """The app's application/problem+json (not a server's page)."""
        ct = (self.header("Content-Type") or "").split(";")[0].strip()
        return ct.lower() == "application/problem+json" and \
            not self.is_server_page

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def json_or_fail(self):
        from harness import Failed
        try:
            return self.json()
        except (ValueError, UnicodeDecodeError) as e:
            raise Failed("response body is not JSON (%s): %r"
                         % (e, self.body[:300]))

    def problem_type(self):
        try:
            return self.json().get("type", "")
        except Exception:
            return ""

    def describe(self):
        hs = "; ".join("%s: %s" % (k, v) for k, v in self.headers)
        body = self.body[:600]
        more = "..." if len(self.body) > 600 else ""
        return "%s %s [%s] %r%s" % (self.status, self.reason, hs, body, more)


def http_request(host, port, method, path, body=None, headers=(),
                 timeout=20):
    """One request on a fresh connection.  headers: list of (name, value);
    values may be bytes (sent as is)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        names = {k.lower() for k, _ in headers}
        for k, v in headers:
            conn.putheader(k, v)
        if body is not None and "content-length" not in names:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body:
            conn.send(body)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, r.getheaders(), data)
    finally:
        conn.close()


def parse_http_response(data, via="raw"):
    """Parse bytes of one HTTP/1.x response (read until close)."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("no complete HTTP response head in %r" % data[:200])
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    status = int(parts[1])
    reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
    headers = []
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        headers.append((k.decode("latin-1").strip(),
                        v.decode("latin-1").strip()))
    r = Response(status, reason, headers, b"", via)
    te = (r.header("Transfer-Encoding") or "").lower()
    if "chunked" in te:
        body = b""
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            body += rest[:size]
            rest = rest[size + 2:]
        r.body = body
    elif r.header("Content-Length") is not None:
        r.body = rest[:int(r.header("Content-Length"))]
    else:
        r.body = rest
    return r


def raw_request(host, port, data, timeout=20):
    """Send raw bytes (a whole request, ideally with Connection: close) and
    read the response until the server closes.  Errors while sending (the
    server may answer and close before reading everything) are ignored as
    long as a response arrives."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_response(s)
    finally:
        s.close()


def read_response(s):
    """The HTTP response on socket s: read until it is whole (by its
    Content-Length) or the server closes."""
    # No shutdown(SHUT_WR): nginx takes a half-close for an aborted
    # request (499) and answers nothing.
    chunks = []
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        chunks.append(b)
        # stop once a complete response with Content-Length is in
        data_so_far = b"".join(chunks)
        head, sep, rest = data_so_far.partition(b"\r\n\r\n")
        if sep:
            for ln in head.split(b"\r\n")[1:]:
                k, _, v = ln.partition(b":")
                if k.strip().lower() == b"content-length":
                    try:
                        if len(rest) >= int(v.strip()):
                            return parse_http_response(data_so_far)
                    except ValueError:
                        pass
    return parse_http_response(b"".join(chunks))


# --- FastCGI (responder role), for talking to the app directly ------------

FCGI_BEGIN_REQUEST, FCGI_ABORT_REQUEST, FCGI_END_REQUEST = 1, 2, 3
FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT, FCGI_STDERR = 4, 5, 6, 7


def _fcgi_record(rtype, content, req_id=1):
    out = b""
    pos = 0
    while True:
        chunk = content[pos:pos + 65535]
        pad = (8 - len(chunk) % 8) % 8
        out += struct.pack("!BBHHBx", 1, rtype, req_id, len(chunk), pad)
        out += chunk + b"\0" * pad
        pos += len(chunk)
        if pos >= len(content):
            return out


def _fcgi_len(n):
    return bytes([n]) if n < 128 else struct.pack("!I", n | 0x80000000)


def fcgi_params(params):
    data = b""
    for k, v in params.items():
        k = k.encode() if isinstance(k, str) else k
        v = v.encode("latin-1") if isinstance(v, str) else v
        data += _fcgi_len(len(k)) + _fcgi_len(len(v)) + k + v
    return data


def fcgi_connect(addr, timeout=20):
    if addr.startswith("/") or addr.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(addr[5:] if addr.startswith("unix:") else addr)
    else:
        host, _, port = addr.rpartition(":")
        s = socket.create_connection((host, int(port)), timeout=timeout)
    return s


def fcgi_request(addr, params, stdin=b"", send_stdin=True, close_after=None,
                 timeout=20):
    """One FastCGI request.  params: dict (values str or bytes).
    send_stdin=False sends no stdin records at all (not even the end);
    close_after=N sends only N bytes of stdin and then closes the
    connection (returns None).  Returns a Response parsed from the CGI
    output."""
    s = fcgi_connect(addr, timeout)
    try:
        msg = _fcgi_record(FCGI_BEGIN_REQUEST,
                           struct.pack("!HB5x", 1, 0))
        p = fcgi_params(params)
        if p:
            msg += _fcgi_record(FCGI_PARAMS, p)
        msg += _fcgi_record(FCGI_PARAMS, b"")
        if close_after is not None:
            msg += _fcgi_record(FCGI_STDIN, stdin[:close_after])
            s.sendall(msg)
            return None
        if send_stdin:
            if stdin:
                msg += _fcgi_record(FCGI_STDIN, stdin)
            msg += _fcgi_record(FCGI_STDIN, b"")
        s.sendall(msg)
        stdout, stderr = b"", b""
        buf = b""
        ended = False
        while not ended:
            b = s.recv(65536)
            if not b:
                break
            buf += b
            while len(buf) >= 8:
                ver, rtype, rid, clen, plen = struct.unpack("!BBHHBx",
                                                            buf[:8])
                if len(buf) < 8 + clen + plen:
                    break
                content = buf[8:8 + clen]
                buf = buf[8 + clen + plen:]
                if rtype == FCGI_STDOUT:
                    stdout += content
                elif rtype == FCGI_STDERR:
                    stderr += content
                elif rtype == FCGI_END_REQUEST:
                    ended = True
                    break
        if not stdout and not ended:
            raise ConnectionError("FastCGI connection closed without a "
                                  "response")
        return parse_cgi_response(stdout)
    finally:
        s.close()


def parse_cgi_response(data):
    sep = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
    head, _, body = data.partition(sep)
    status, reason, headers = 200, "OK", []
    for ln in head.replace(b"\r\n", b"\n").split(b"\n"):
        if not ln:
            continue
        k, _, v = ln.partition(b":")
        k = k.decode("latin-1").strip()
        v = v.decode("latin-1").strip()
        if k.lower() == "status":
            code, _, reason = v.partition(" ")
            status = int(code)
        else:
            headers.append((k, v))
    return Response(status, reason, headers, body, via="fcgi")
