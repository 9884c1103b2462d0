// verify_webhook.js - a delivery checked by the npm package standardwebhooks
// (the specification's reference library), independently of libidem: reads
// {"secret", "headers": {"webhook-id", ...}, "body": base64} on stdin,
// prints "ok" (exit 0) or "refused: why" (exit 1).  s_webhooks.py runs it
// with NODE_PATH at the node_modules that holds the package.
"use strict";
const { Webhook } = require("standardwebhooks");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (c) => { input += c; });
process.stdin.on("end", () => {
  const d = JSON.parse(input);
  try {
    new Webhook(d.secret).verify(Buffer.from(d.body, "base64").toString(),
      d.headers);
    console.log("ok");
  } catch (e) {
    console.log("refused: " + e.message);
    process.exitCode = 1;
  }
});
