// Connect and stay connected: over a 10 s watch of a busy client, the driver's streaming
// monitor (exhaust hello) records no failed heartbeat and clears no pool, and the server stays
// the primary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoClient, driverVersion, uri, uniqueDB, defer } from './helpers.mjs';

const WATCH_MS = 10_000;

test(`driver ${driverVersion}: 10 s of busy work, no heartbeat failures, no pool clears, always primary`, async (t) => {
  const client = new MongoClient(uri, { appName: 'watchtree-node-heartbeat' });
  const seen = { awaited: 0, polled: 0, failed: [], cleared: 0, notPrimary: [] };
  client.on('serverHeartbeatSucceeded', (e) => {
    if (e.awaited) seen.awaited++;
    else seen.polled++;
  });
  client.on('serverHeartbeatFailed', (e) => seen.failed.push(String(e.failure)));
  client.on('connectionPoolCleared', () => seen.cleared++);
  client.on('serverDescriptionChanged', (e) => {
    if (e.newDescription.type !== 'RSPrimary') seen.notPrimary.push(e.newDescription.type);
  });
  await client.connect();
  defer(t, () => client.close());
  const coll = client.db(uniqueDB('hb')).collection('c');

  let ops = 0;
  const end = Date.now() + WATCH_MS;
  while (Date.now() < end) {
    await coll.insertOne({ n: ops });
    await coll.findOne({ n: ops });
    ops++;
  }
  assert.deepEqual(seen.failed, [], 'failed heartbeats');
  assert.equal(seen.cleared, 0, 'pool clears');
  assert.deepEqual(seen.notPrimary, [], 'server descriptions other than RSPrimary');
  assert.ok(seen.awaited >= 3, `streamed (awaited) heartbeats: ${seen.awaited}, want the exhaust protocol in use`);
  assert.equal(await coll.countDocuments(), ops);
});
