"""inbox_sender.py - senders nobody here wrote, for the tests of signed
sources ([inbox "NAME"]: tests/direct/inbox.py, tests/lifecycle/inbox.py):
the headers of a message as the npm packages standardwebhooks
(Webhook.sign) and stripe (webhooks.generateTestHeaderString) make them,
in tests/openapi/node_modules (pinned by its package-lock.json, installed
by tests/lib/deps.sh), through inbox_sign.js.

    s = Signer(srcdir)
    s.why_not()     # None, or why the packages cannot run (node missing)
    s.sign([{"scheme": "standard-webhooks" | "stripe", "secret": ...,
             "id": ..., "ts": UNIX_SECONDS, "body": BYTES}, ...])
                    # -> one dict of headers per message
"""

import base64
import json
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


class Signer:
    """Headers for messages, made by the npm packages in one node run per
    batch."""

    def __init__(self, srcdir):
        self.modules = os.path.join(os.path.abspath(srcdir), "tests",
                                    "openapi", "node_modules")
        self.script = os.path.join(HERE, "inbox_sign.js")

    def why_not(self):
        if shutil.which("node") is None:
            return "node is not installed"
        for m in ("standardwebhooks", "stripe"):
            if not os.path.isfile(os.path.join(self.modules, m,
                                               "package.json")):
                return "%s not installed in tests/openapi/node_modules " \
                       "(npm ci there: tests/lib/deps.sh)" % m
        return None

    def sign(self, cases):
        for c in cases:
            c["body"] = base64.b64encode(c["body"]).decode()
        p = subprocess.run(["node", self.script], input=json.dumps(
            {"modules": self.modules, "cases": cases}).encode(),
            capture_output=True, timeout=60, check=True)
        return json.loads(p.stdout)
