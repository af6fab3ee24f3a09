// The Node.js side of bench/peers.py: graphile-worker and pg-boss, each set up, fed and drained
// as the Python peers are (bench/support/peer_python.py says how):
//   node peer_node.mjs PEER setup|enqueue|work CONNINFO JOBS
// Their packages are loaded from the bench's scratch directory, NODE_PEERS_DIR.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.NODE_PEERS_DIR, "package.json"));
const [peer, step, conninfo, jobsText] = process.argv.slice(2);
const jobs = Number(jobsText);
const ran = [];

function ready() {
  process.stdout.write("ready\n");
}

async function finish(stop) {
  process.stdout.write(`done ${ran.length} ${new Set(ran).size}\n`);
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.on("end", resolve));
  await stop();
  process.exit(0);
}

function whenAllRan() {
  return new Promise((resolve) => {
    const check = setInterval(() => {
      if (ran.length >= jobs) {
        clearInterval(check);
        resolve();
      }
    }, 5);
  });
}

async function graphile() {
  const { run, runMigrations } = require("graphile-worker");
  const { Client } = require("pg");
  const options = { connectionString: conninfo, concurrency: 1, noHandleSignals: true };
  if (step === "setup") return runMigrations(options);
  if (step === "enqueue") {
    const client = new Client({ connectionString: conninfo });
    await client.connect();
    const specs = JSON.stringify(
      Array.from({ length: jobs }, (_, n) => ({ identifier: "noop", payload: { n } })),
    );
    const started = performance.now();
    await client.query(
      "SELECT count(*) FROM graphile_worker.add_jobs((SELECT array_agg(s) FROM " +
        "json_populate_recordset(null::graphile_worker.job_spec, $1::json) s))",
      [specs],
    );
    process.stdout.write(`enqueued ${(performance.now() - started) / 1000}\n`);
    return client.end();
  }
  const noop = async (payload) => {
    ran.push(payload.n);
  };
  const logger = new (require("graphile-worker").Logger)(() => () => {});
  ready();
  const runner = await run({ ...options, logger, taskList: { noop } });
  await whenAllRan();
  await finish(() => runner.stop());
}

async function pgBoss() {
  const PgBoss = require("pg-boss");
  const boss = new PgBoss({ connectionString: conninfo, schedule: false, supervise: false });
  boss.on("error", (error) => process.stderr.write(`${error}\n`));
  await boss.start();
  if (step === "setup") {
    await boss.createQueue("noop");
    return boss.stop({ graceful: false, wait: true });
  }
  if (step === "enqueue") {
    const batch = Array.from({ length: jobs }, (_, n) => ({ name: "noop", data: { n } }));
    const started = performance.now();
    await boss.insert(batch);
    process.stdout.write(`enqueued ${(performance.now() - started) / 1000}\n`);
    return boss.stop({ graceful: false, wait: true });
  }
  ready();
  // Batches of 100, as the consumer's sweep claims: one job a fetch waits out a poll each time.
  await boss.work("noop", { pollingIntervalSeconds: 0.5, batchSize: 100 }, async (batch) => {
    for (const job of batch) ran.push(job.data.n);
  });
  await whenAllRan();
  await finish(() => boss.stop({ graceful: false, wait: true }));
}

await (peer === "graphile-worker" ? graphile() : pgBoss());
if (step !== "work") process.exit(0);
