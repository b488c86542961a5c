// Shared helpers of the Node.js client suite: the driver and the server to use, clients,
// unique names. WATCHTREE_NODE_DRIVER names the driver package: mongodb (6.x, the default) or
// mongodb7 (7.x); run.sh runs the suite once with each the installed Node.js can run.
import { createHash } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const driverPackage = process.env.WATCHTREE_NODE_DRIVER || 'mongodb';
export const driver = await import(driverPackage);
export const driverVersion = createRequire(import.meta.url)(`${driverPackage}/package.json`).version;
export const { MongoClient, MongoServerError, MongoBulkWriteError } = driver;

/** On a real replica set (WATCHTREE_MONGODB_URI) mongosim-only checks skip and say why. */
export const onRealServer = Boolean(process.env.WATCHTREE_MONGODB_URI);
export const uri = process.env.WATCHTREE_MONGODB_URI || process.env.MONGOSIM_URI;
if (!uri) {
  throw new Error('set MONGOSIM_URI (make test-clients does) or WATCHTREE_MONGODB_URI');
}

let seq = 0;

/** A database name unique to this process and call, so files running in parallel never collide. */
export function uniqueDB(prefix) {
  seq += 1;
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${seq}`;
}

/** Connects a client; the caller closes it (t.after). */
export async function connect(options = {}) {
  const client = new MongoClient(uri, { appName: `watchtree-node-${process.pid}`, ...options });
  await client.connect();
  return client;
}

/** Polls fn until it returns a truthy value or timeoutMs passes (then throws msg). */
export async function waitFor(msg, fn, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${msg}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Runs configureFailPoint; returns false when the server has no test commands (a real server
 * without enableTestCommands), so the caller can skip with a message.
 */
export async function failPoint(client, name, spec) {
  try {
    await client.db('admin').command({ configureFailPoint: name, ...spec });
    return true;
  } catch (err) {
    if (err.code === 59) return false; // CommandNotFound
    throw err;
  }
}

const deferred = new WeakMap();

/**
 * Runs fn when test t ends, in reverse order of registration (a change stream closes before
 * its client), whatever the outcome.
 */
export function defer(t, fn) {
  let stack = deferred.get(t);
  if (!stack) {
    stack = [];
    deferred.set(t, stack);
    t.after(async () => {
      while (stack.length) await stack.pop()();
    });
  }
  stack.push(fn);
}

/**
 * Runs fn holding a lock named name for this server, across processes: a server has one
 * failCommand fail point, so the suites of the two drivers, which run at once, must not
 * configure it at the same time.
 */
export async function withServerLock(name, fn) {
  const key = createHash('sha1').update(uri).digest('hex').slice(0, 12);
  const dir = join(tmpdir(), `watchtree-clients-${key}-${name}.lock`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      mkdirSync(dir);
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      if (Date.now() > deadline) throw new Error(`lock ${dir} held for 60 s (remove it if no suite runs)`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
