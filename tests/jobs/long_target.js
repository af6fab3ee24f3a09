// A long-running job target in plain Node.js (node:http, node:crypto, fetch; no dependency):
// it answers a job's call 202 Accepted, heartbeats every HEARTBEAT_MS while it works for
// SECONDS, then reports its completion (docs/long-running-jobs.md). Every report is signed with
// the target's HMAC secret, names its job in the body and carries the call's claim token.
//
// Env: TARGET_SECRET, CONSUMER_URLS (comma-separated: reports go to the first that answers, as
// through a load balancer; POST /_urls with a JSON list replaces them), SECONDS (a job's payload
// may say its own "seconds"), HEARTBEAT_MS. Prints {"port": N} once listening.
// GET /_log answers every event it saw, for the test to read.
"use strict";
const http = require("node:http");
const crypto = require("node:crypto");

const SECRET = process.env.TARGET_SECRET || "";
let URLS = (process.env.CONSUMER_URLS || "").split(",").filter(Boolean);
const SECONDS = Number(process.env.SECONDS || "10");
const HEARTBEAT_MS = Number(process.env.HEARTBEAT_MS || "1000");
const log = [];

function sign(body) {
  const timestamp = Math.floor(Date.now() / 1000).toString();
  const digest = crypto.createHmac("sha256", SECRET).update(`${timestamp}.`).update(body).digest("hex");
  return { "X-Consumer-Timestamp": timestamp, "X-Consumer-Signature": `v1=${digest}` };
}

function signedByConsumer(headers, body) {
  const timestamp = headers["x-consumer-timestamp"] || "";
  const expected = crypto.createHmac("sha256", SECRET).update(`${timestamp}.`).update(body).digest("hex");
  return (headers["x-consumer-signature"] || "").split(",").some((item) => item.trim() === `v1=${expected}`);
}

async function report(id, claim, what, document) {
  const body = JSON.stringify({ id, ...document });
  for (let round = 0; round < 20; round++) {
    for (const url of URLS) {
      try {
        const answer = await fetch(`${url}/jobs/${id}/${what}`, {
          method: "POST",
          headers: { "Content-Type": "application/json", "X-Consumer-Claim": claim, ...sign(body) },
          body,
        });
        const value = await answer.json();
        log.push({ event: what, id, status: answer.status, answer: value });
        return { status: answer.status, value };
      } catch (error) {
        log.push({ event: `${what}-unreachable`, id, url, error: String(error) });
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { status: 0, value: {} };
}

async function work(id, claim, seconds) {
  const started = Date.now();
  while (Date.now() - started < seconds * 1000) {
    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS));
    const beat = await report(id, claim, "heartbeat", {});
    if (beat.status !== 200) return; // taken over or gone: stop, whoever holds it now goes on
    if (beat.value.cancelled) {
      log.push({ event: "stopped", id, reason: "cancelled" });
      return;
    }
  }
  const took = (Date.now() - started) / 1000;
  await report(id, claim, "complete", { outcome: "done", result: { seconds: took } });
}

http
  .createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks);
      if (request.method === "GET" && request.url === "/_log") {
        response.writeHead(200, { "Content-Type": "application/json" });
        return response.end(JSON.stringify(log));
      }
      if (request.method === "POST" && request.url === "/_urls") {
        URLS = JSON.parse(body);
        response.writeHead(200);
        return response.end("{}");
      }
      if (!signedByConsumer(request.headers, body)) {
        response.writeHead(401);
        return response.end("{}");
      }
      const job = JSON.parse(body);
      const claim = request.headers["x-consumer-claim"];
      log.push({ event: "call", id: job.id, claim, attempt: job.attempt });
      response.writeHead(202, { "Content-Type": "application/json" });
      response.end(JSON.stringify({ accepted: job.id }));
      work(job.id, claim, Number(job.payload.seconds || SECONDS));
    });
  })
  .listen(0, "127.0.0.1", function () {
    process.stdout.write(JSON.stringify({ port: this.address().port }) + "\n");
  });
