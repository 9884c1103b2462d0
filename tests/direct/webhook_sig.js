// webhook_sig.js - the Standard Webhooks reference library (the npm
// package standardwebhooks) for tests/direct/webhook_sig.py: reads
// {"module": PATH, "cases": [...]} on stdin, answers one result per case
// as a JSON array on stdout.  A case signs ({"op": "sign", secret, id, ts,
// body}) or verifies ({"op": "verify", secret, id, ts, sigs, body}) with
// the body in base64 (it may be any bytes) and the library's own clock
// and 5 min tolerance; a result is {"sig"} or {"ok", "error"}.
"use strict";

const jsonJob = require("../lib/json_job");

jsonJob((job) => {
    const { Webhook } = require(job.module);
    return job.cases.map((c) => {
        const body = Buffer.from(c.body, "base64");
        try {
            const wh = new Webhook(c.secret);
            if (c.op === "sign")
                return { sig: wh.sign(c.id, new Date(c.ts * 1000), body) };
            wh.verify(body, {
                "webhook-id": c.id,
                "webhook-timestamp": c.ts,
                "webhook-signature": c.sigs,
            }, { jsonParse: false });
            return { ok: true };
        } catch (e) {
            return { ok: false, error: String(e.message) };
        }
    });
});
