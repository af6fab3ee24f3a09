// Enqueue jobs from Node.js with the SQL function consumer_enqueue, inside the program's own
// transactions (the `pg` client from npm), against consumer processes that LISTEN.
//
//   DATABASE_URL=postgres://... JOBS=50 node sql_enqueue.js
//
// 1. A transaction that enqueues and rolls back: no job, and nothing starts.
// 2. JOBS transactions, one at a time, each enqueuing one `stamp` job and committing: the time
//    from the COMMIT's answer to the job's start (`test_job_starts.started`, stamped by the
//    handler on the same machine's clock) is each job's start latency.
// 3. The same key twice: the same job id. An unknown kind: SQLSTATE 22023, nothing stored.
// Prints one JSON object on stdout; exits 1 on the first check that fails.
"use strict";
const { Client } = require("pg");

const JOBS = Number(process.env.JOBS || 50);
const WAIT_MS = Number(process.env.WAIT_MS || 10000);

function nowSeconds() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

function fail(message) {
  console.error(`sql_enqueue.js: ${message}`);
  process.exit(1);
}

async function enqueue(client, kind, payload, key) {
  const sql = "SELECT consumer_enqueue($1, $2::jsonb, key => $3) AS id";
  const { rows } = await client.query(sql, [kind, JSON.stringify(payload), key]);
  return Number(rows[0].id);
}

async function startedAt(watcher, jobId, deadline) {
  for (;;) {
    const { rows } = await watcher.query(
      "SELECT started FROM test_job_starts WHERE job_id = $1", [jobId]);
    if (rows.length) return Number(rows[0].started);
    if (Date.now() > deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, 0.2));
  }
}

async function rolledBack(client, watcher) {
  await client.query("BEGIN");
  const id = await enqueue(client, "stamp", { n: -1 }, "node-rolled-back");
  await client.query("ROLLBACK");
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const { rows } = await watcher.query(
    "SELECT count(*)::int AS n FROM jobs WHERE id = $1 OR idempotency_key = 'node-rolled-back'",
    [id]);
  if (rows[0].n !== 0) fail("a rolled-back enqueue left a job");
  return rows[0].n;
}

async function committed(client, watcher) {
  const latencies = [];
  for (let n = 0; n < JOBS; n++) {
    await client.query("BEGIN");
    const id = await enqueue(client, "stamp", { n }, `node-${n}`);
    await client.query("COMMIT");
    const commitAt = nowSeconds();
    const started = await startedAt(watcher, id, Date.now() + WAIT_MS);
    if (started === null) fail(`job ${id} did not start within ${WAIT_MS} ms of its commit`);
    latencies.push((started - commitAt) * 1000);
  }
  return latencies;
}

async function refusals(client) {
  const first = await enqueue(client, "stamp", { n: 1 }, "node-same-key");
  const again = await enqueue(client, "stamp", { n: 2 }, "node-same-key");
  if (first !== again) fail(`the same key gave two jobs: ${first} and ${again}`);
  try {
    await enqueue(client, "no-such-kind", {}, "node-bad-kind");
    fail("an unknown kind was accepted");
  } catch (error) {
    if (error.code !== "22023") throw error;
    return error.message;
  }
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main() {
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  const watcher = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  await watcher.connect();
  try {
    const afterRollback = await rolledBack(client, watcher);
    const latencies = await committed(client, watcher);
    const badKind = await refusals(client);
    const sorted = [...latencies].sort((a, b) => a - b);
    const p50 = percentile(sorted, 50), p99 = percentile(sorted, 99);
    console.error(`start latency (notify, node): p50 ${p50.toFixed(1)} ms, ` +
      `p99 ${p99.toFixed(1)} ms (${sorted.length} jobs)`);
    console.log(JSON.stringify({ after_rollback: afterRollback, jobs: sorted.length, p50_ms: p50,
      p99_ms: p99, latencies_ms: latencies, bad_kind: badKind }));
  } finally {
    await client.end();
    await watcher.end();
  }
}

main().catch((error) => fail(error.stack || String(error)));
