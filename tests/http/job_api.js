// The job API from Node.js: plain fetch and crypto (no client library), signing each request as
// docs/job-api.md says, and `pg` for the SQL function inside a transaction.
//
//   BASE_URL=http://127.0.0.1:PORT SECRET=... DATABASE_URL=postgres://... node job_api.js
//
// Prints one JSON object on stdout; exits 1 on the first check that fails.
"use strict";
const crypto = require("node:crypto");
const { Client } = require("pg");

const BASE = process.env.BASE_URL;
const SECRET = process.env.SECRET;

function fail(message) {
  console.error(`job_api.js: ${message}`);
  process.exit(1);
}

// Sign "<timestamp>.<METHOD> <path>\n<body>" with HMAC-SHA256; the path as the server decodes
// it (the key unencoded), the URL with the key percent-encoded.
async function call(method, key, body, { secret = SECRET, retry = false } = {}) {
  const suffix = key === undefined ? "" : `/${key}` + (retry ? "/retry" : "");
  const path = `/jobs${suffix}`;
  const url = BASE + (key === undefined ? "/jobs" : `/jobs/${encodeURIComponent(key)}`) +
    (retry ? "/retry" : "");
  const text = body === undefined ? "" : JSON.stringify(body);
  const timestamp = Math.floor(Date.now() / 1000).toString();
  const signature = crypto.createHmac("sha256", secret)
    .update(`${timestamp}.${method} ${path}\n${text}`).digest("hex");
  const response = await fetch(url, {
    method,
    body: text || undefined,
    headers: { "Content-Type": "application/json", "X-Consumer-Timestamp": timestamp,
      "X-Consumer-Signature": `v1=${signature}` },
  });
  return { status: response.status, body: await response.json() };
}

async function until(key, wanted, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { status, body } = await call("GET", key);
    if (status !== 200) fail(`GET ${key}: ${status} ${JSON.stringify(body)}`);
    if (body.job.status === wanted) return body.job;
    if (Date.now() > deadline) fail(`${key} is ${body.job.status}, not ${wanted}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function expect(what, got, wanted) {
  if (got !== wanted) fail(`${what}: got ${JSON.stringify(got)}, wanted ${JSON.stringify(wanted)}`);
}

async function main() {
  const db = new Client({ connectionString: process.env.DATABASE_URL });
  await db.connect();
  const result = {};
  try {
    // Over HTTP, then the same key through the SQL function inside a transaction: one job.
    const created = await call("POST", undefined, { kind: "stamp", payload: { n: 1 }, key: "node-1" });
    expect("POST /jobs", created.status, 201);
    await db.query("BEGIN");
    const { rows } = await db.query(
      "SELECT consumer_enqueue('stamp', $1::jsonb, key => $2) AS id", ['{"n": 2}', "node-1"]);
    await db.query("COMMIT");
    expect("consumer_enqueue of the same key", Number(rows[0].id), created.body.job.id);
    // The other way round: SQL first (committed), then HTTP answers the existing job.
    await db.query("BEGIN");
    const sql = await db.query("SELECT consumer_enqueue('stamp', '{}', key => 'node-2') AS id");
    await db.query("COMMIT");
    const again = await call("POST", undefined, { kind: "stamp", key: "node-2" });
    expect("POST of a key SQL enqueued", again.status, 200);
    expect("its id", again.body.job.id, Number(sql.rows[0].id));
    result.done = (await until("node-1", "done")).status;
    // A job for tomorrow, cancelled while pending.
    const later = new Date(Date.now() + 86400e3).toISOString();
    await call("POST", undefined, { kind: "stamp", key: "node-later", run_at: later });
    const cancelled = await call("DELETE", "node-later");
    expect("DELETE", cancelled.status, 200);
    result.cancelled = cancelled.body.job.status;
    // A job that dies, retried: it runs again and is done.
    await call("POST", undefined, { kind: "fails-once", key: "node-dead" });
    const dead = await until("node-dead", "dead");
    result.dead_error = dead.last_error;
    const retried = await call("POST", "node-dead", undefined, { retry: true });
    expect("retry", retried.status, 200);
    result.after_retry = (await until("node-dead", "done")).status;
    // A wrong signature: refused, nothing stored.
    const forged = await call("POST", undefined, { kind: "stamp", key: "node-forged" },
      { secret: "not-the-secret-0123456789" });
    result.forged = [forged.status, forged.body.error];
    expect("GET of the forged key", (await call("GET", "node-forged")).status, 404);
    const count = await db.query("SELECT count(*)::int AS n FROM jobs");
    result.jobs = count.rows[0].n;
  } finally {
    await db.end();
  }
  console.log(JSON.stringify(result));
}

main().catch((error) => fail(error.stack || String(error)));
