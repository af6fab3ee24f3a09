// An HTTP target as a team would write one, in plain node:http: it counts calls per
// Idempotency-Key, does each key's effect once (a repeat of a done key is dropped, answered 200),
// records what it received, and fails a share of calls on command.
//
//   node target_server.js [port]     prints {"port": N} on its first line of output
//
// POST /_control  {"fail": {"500": 0.1, "stall": 0.05, "reset": 0.05, "429": 0.05,
//                  "lost": 0.05}, "stall_ms": 3000, "retry_after": 1, "reject": "substring"}
//   "lost": the effect is done, then the connection is reset before the answer (the consumer
//   cannot tell it from a failure: its repeat must carry the same key).
//   "reject": a body containing the substring is answered 422 (a permanent failure).
// GET /_calls      every call: key, path, outcome, headers, body
// GET /_raw        the last call's request as received (request line, raw headers, body)
// Paths: /garbage (200, not JSON), /huge (200, 5 MB), /slow-body (200, then the body drips),
//        /slow (no answer for stall_ms), /redirect (302), /status/NNN; anything else: the target.
"use strict";
const http = require("node:http");

const control = { fail: {}, stall_ms: 3000, retry_after: 1, reject: "" };
const calls = [];
const done = new Map(); // key -> answered 2xx (the effect happened)
let raw = "";

function failure() {
  let draw = Math.random();
  for (const [mode, share] of Object.entries(control.fail)) {
    if (draw < share) return mode;
    draw -= share;
  }
  return "";
}

function record(request, body, outcome) {
  const key = request.headers["idempotency-key"] || "";
  calls.push({ key, path: request.url, outcome, headers: request.headers, body: body.toString() });
}

function special(request, response, body) {
  const path = request.url;
  if (path === "/garbage") return response.end("<html>not json</html>");
  if (path === "/huge") return response.end(Buffer.alloc(5 * 1024 * 1024, 120));
  if (path === "/slow") return setTimeout(() => response.end("{}"), control.stall_ms);
  if (path === "/redirect") {
    response.writeHead(302, { Location: "http://127.0.0.1:1/elsewhere" });
    return response.end();
  }
  if (path === "/slow-body") {
    response.writeHead(200, { "Content-Type": "application/json" });
    response.write('{"slow":');
    return setTimeout(() => response.end("true}"), control.stall_ms);
  }
  const status = /^\/status\/(\d{3})$/.exec(path);
  if (status) {
    response.writeHead(Number(status[1]), { "Content-Type": "application/json" });
    return response.end(JSON.stringify({ status: Number(status[1]) }));
  }
  return false;
}

function target(request, response, body) {
  const key = request.headers["idempotency-key"] || "";
  if (done.has(key)) {
    record(request, body, "duplicate");
    response.writeHead(200, { "Content-Type": "application/json" });
    return response.end(JSON.stringify({ duplicate: true }));
  }
  if (control.reject && body.includes(control.reject)) {
    record(request, body, "rejected");
    response.writeHead(422, { "Content-Type": "application/json" });
    return response.end(JSON.stringify({ error: "rejected" }));
  }
  const mode = failure();
  record(request, body, mode || "done");
  if (mode === "500") {
    response.writeHead(500);
    return response.end("boom");
  }
  if (mode === "429") {
    response.writeHead(429, { "Retry-After": String(control.retry_after) });
    return response.end();
  }
  if (mode === "reset") return request.socket.destroy();
  if (mode === "stall") return setTimeout(() => request.socket.destroy(), control.stall_ms);
  done.set(key, true); // the effect: once per key
  if (mode === "lost") return request.socket.destroy();
  response.writeHead(200, { "Content-Type": "application/json" });
  response.end(JSON.stringify({ processed: key }));
}

function serve(request, response, body) {
  if (request.url === "/_calls") {
    response.writeHead(200, { "Content-Type": "application/json" });
    return response.end(JSON.stringify({ calls }));
  }
  if (request.url === "/_raw") return response.end(raw);
  if (request.url === "/_control") {
    Object.assign(control, JSON.parse(body.toString() || "{}"));
    return response.end("{}");
  }
  raw = `${request.method} ${request.url} HTTP/${request.httpVersion}\r\n`;
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    raw += `${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}\r\n`;
  }
  raw += `\r\n${body.toString()}`;
  if (special(request, response, body) === false) target(request, response, body);
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => serve(request, response, Buffer.concat(chunks)));
});
server.keepAliveTimeout = 30000;
server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
