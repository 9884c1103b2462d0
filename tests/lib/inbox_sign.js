// inbox_sign.js - senders nobody here wrote, for tests/lib/inbox_sender.py:
// signs messages with the npm packages
// standardwebhooks (Webhook.sign) and stripe
// (webhooks.generateTestHeaderString), from tests/openapi/node_modules.
// Reads {"modules": DIR, "cases": [...]} on stdin, each case {scheme:
// "standard-webhooks" | "stripe", secret, id, ts (Unix seconds), body (in
// base64)}; answers a JSON array of the headers each message carries.
"use strict";

const path = require("path");
const jsonJob = require("./json_job");

jsonJob((job) => {
    const { Webhook } = require(path.join(job.modules, "standardwebhooks"));
    const Stripe = require(path.join(job.modules, "stripe"));
    const stripe = new Stripe("sk_test_unused");
    return job.cases.map((c) => {
        const body = Buffer.from(c.body, "base64");
        if (c.scheme === "stripe")
            return {
                "Stripe-Signature": stripe.webhooks.generateTestHeaderString({
                    payload: body.toString("utf8"), secret: c.secret,
                    timestamp: c.ts }),
            };
        return {
            "webhook-id": c.id,
            "webhook-timestamp": String(c.ts),
            "webhook-signature": new Webhook(c.secret).sign(c.id,
                new Date(c.ts * 1000), body),
        };
    });
});
