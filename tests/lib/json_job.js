// json_job.js - the frame of the test suite's node scripts that run npm
// packages for a Python caller (tests/lib/inbox_sign.js,
// tests/direct/webhook_sig.js): answer(job) is called with the JSON
// document read from stdin, and what it returns is written to stdout as
// JSON.
"use strict";

module.exports = function jsonJob(answer) {
    let input = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (d) => { input += d; });
    process.stdin.on("end", () => {
        process.stdout.write(JSON.stringify(answer(JSON.parse(input))));
    });
};
