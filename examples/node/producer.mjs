// A tickwork producer in Node.js: enqueues tasks and emits events over the HTTP API that
// `tickwork dashboard` serves at /api/v1, then reads the results back. No package to
// install: Node 18's fetch is all it needs.
//
//   TICKWORK_API=http://127.0.0.1:8080/api/v1 node examples/node/producer.mjs TASK [ARGS_JSON...]
//   (TICKWORK_TOKEN=... when the dashboard has a token or a users file)
//
// Each ARGS_JSON is one message's positional arguments (a JSON array); each is sent with
// an Idempotency-Key, so a retried request stores it once. It prints one JSON line: the
// ids, each message's result (for a task that keeps its results), and what a call with
// arguments the task does not take was answered.

const base = process.env.TICKWORK_API ?? "http://127.0.0.1:8080/api/v1";
const token = process.env.TICKWORK_TOKEN;

/** One API call; throws an Error carrying the API's stable error code. */
async function call(method, path, body, headers = {}) {
  const response = await fetch(base + path, {
    method,
    headers: {
      "content-type": "application/json",
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) {
    const error = new Error(answer.error.message);
    error.code = answer.error.code;
    error.status = response.status;
    throw error;
  }
  return answer;
}

/** Enqueue TASK with ARGS; returns the message id. */
export async function enqueue(task, args = [], { key, delayS, idempotencyKey } = {}) {
  const body = { task, args, ...(key ? { key } : {}), ...(delayS ? { delay_s: delayS } : {}) };
  const headers = idempotencyKey ? { "idempotency-key": idempotencyKey } : {};
  return (await call("POST", "/messages", body, headers)).id;
}

/** Emit event NAME with PAYLOAD; returns the event id. */
export async function emit(name, payload, { key, eventId } = {}) {
  return (await call("POST", "/events", { name, payload, key, event_id: eventId })).id;
}

/** Wait (polling) until message ID's run has ended; its result record. */
export async function result(id, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await call("GET", `/results/${encodeURIComponent(id)}`);
    if (info.status === "succeeded" || info.status === "failed") return info;
    if (Date.now() > deadline) throw new Error(`message ${id} still ${info.status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function main() {
  const [task, ...calls] = process.argv.slice(2);
  if (!task) {
    console.error("usage: node producer.mjs TASK [ARGS_JSON...]");
    process.exit(2);
  }
  const ids = [];
  for (const [index, text] of calls.entries()) {
    const args = JSON.parse(text);
    const idempotencyKey = `node-${task}-${index}-${text}`;
    const id = await enqueue(task, args, { idempotencyKey });
    const again = await enqueue(task, args, { idempotencyKey }); // a retry: the same message
    if (again !== id) throw new Error("a retried request stored a second message");
    ids.push(id);
  }
  let refused = null;
  try {
    await enqueue(task, ["not", "what", "it", "takes"]);
  } catch (error) {
    refused = { status: error.status, code: error.code };
  }
  const results = [];
  for (const id of ids) results.push((await result(id)).value);
  const event = await emit("node.done", { count: ids.length });
  console.log(JSON.stringify({ ids, results, refused, event }));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error) => {
    console.error(error.code ? `${error.code}: ${error.message}` : error);
    process.exit(1);
  });
}
