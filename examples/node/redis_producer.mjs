// A tickwork producer in Node.js that writes messages straight into Redis, in the format
// docs/protocol.md writes down: the message's id (keyed ones derived from queue and key
// with BLAKE2b), its shard, its record, and the `enqueue` script tickwork's own producer
// calls (scheduler/backends/redis/lua: prelude.lua, then enqueue.lua), which keeps the
// key index and the due sets in one atomic step.
//
//   cd examples/node && npm ci        # redis and blakejs, from the lock file
//   REDIS_URL=redis://127.0.0.1:6379/0 TICKWORK_LUA=../../scheduler/backends/redis/lua \
//     node redis_producer.mjs QUEUE TASK ARGS_JSON [KEY]   (TICKWORK_PREFIX: tw unless set)
//
// Prints one JSON line: the message's id and what the script answered ("enqueued",
// "duplicate", "ignored", or a conflict on the key). Nothing checks the arguments here:
// a worker that cannot run the message sends it to the poison queue with the reason.

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import { blake2b } from "blakejs";
import { createClient } from "redis";

const SHARD_KEYS = ["m", "s", "r", "l", "t", "a", "e", "k", "pm", "pf", "pz", "c", "b", "f", "w"];
const encoder = new TextEncoder();

const hex = (bytes) => Buffer.from(bytes).toString("hex");

/** The id of KEY in QUEUE, as every tickwork producer derives it. */
export function keyedId(queue, key) {
  return "k" + hex(blake2b(encoder.encode(`${queue}\0${key}`), undefined, 12));
}

/** A fresh time-ordered id: 11 hex digits of epoch ms, then 16 random hex digits. */
export function freshId(nowMs) {
  const random = randomBytes(8);
  random[0] &= 0x7f;
  return nowMs.toString(16).padStart(11, "0") + hex(random);
}

/** The shard of a message among COUNT: by its key, else by its id up to the first ".". */
export function shardOf(count, id, key) {
  if (count === 1) return 0;
  const digest = blake2b(encoder.encode(key ?? id.split(".")[0]), undefined, 4);
  return Buffer.from(digest).readUInt32BE(0) % count;
}

/** The stored record: "priority|timeout_ms|due_ms|key length|key" then the body. */
export function record(priority, timeoutMs, dueMs, key, body) {
  const keyBytes = encoder.encode(key ?? "");
  return `${priority}|${timeoutMs}|${dueMs}|${keyBytes.length}|${key ?? ""}${body}`;
}

/** Enqueue TASK with ARGS in QUEUE (under KEY when given), due now; [id, outcome]. */
export async function enqueue(client, script, { prefix = "tw", queue, task, args, key }) {
  const meta = `${prefix}:meta:${queue}`;
  await client.hSetNX(meta, "shards", "1"); // a queue's shard count is fixed when first used
  await client.sAdd(`${prefix}:queues`, queue);
  const shards = Number(await client.hGet(meta, "shards"));
  const now = Date.now();
  const id = key === undefined ? freshId(now) : keyedId(queue, key);
  const body = JSON.stringify({
    id,
    queue,
    task,
    args,
    ...(key === undefined ? {} : { key }),
    scheduled_at: now, // epoch ms
    max_attempts: 1,
    timeout_s: 300,
  });
  const tag = `{${prefix}:${queue}:${shardOf(shards, id, key)}}`;
  const keys = SHARD_KEYS.map((name) => `${tag}:${name}`);
  const argv = ["error", "0", "1", id, key ?? "", "0", String(now), record(0, 300000, now, key, body)];
  const reply = await client.eval(script, { keys, arguments: argv });
  return [id, reply[0] === "CONFLICT" ? `conflict on ${reply[1]}` : reply[0]];
}

async function main() {
  const [queue, task, argsJson, key] = process.argv.slice(2);
  if (!queue || !task || !argsJson) {
    console.error("usage: node redis_producer.mjs QUEUE TASK ARGS_JSON [KEY]");
    process.exit(2);
  }
  const lua = process.env.TICKWORK_LUA;
  // "#!lua" first: flags (none), so a Redis out of memory refuses the call whole
  const script = "#!lua\n" + ["prelude", "enqueue"].map((n) => readFileSync(join(lua, `${n}.lua`), "utf8")).join("\n");
  const client = createClient({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379/0" });
  await client.connect();
  try {
    const prefix = process.env.TICKWORK_PREFIX ?? "tw";
    const call = { prefix, queue, task, args: JSON.parse(argsJson), key };
    const [id, outcome] = await enqueue(client, script, call);
    console.log(JSON.stringify({ id, outcome }));
  } finally {
    await client.quit();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
