// Change streams: events, pre- and post-images, resume, invalidate, and resume through a
// fail point.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, failPoint, uniqueDB, defer, withServerLock } from './helpers.mjs';

test('events in order, with updateDescription and updateLookup', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('cs')).collection('c');
  await c.insertOne({ _id: 0 }); // the collection exists before the stream opens
  const cs = c.watch([], { fullDocument: 'updateLookup' });
  defer(t, () => cs.close());
  await cs.tryNext(); // the stream is open (the aggregate ran) before the writes
  await c.insertOne({ _id: 1, v: 1, gone: true });
  await c.updateOne({ _id: 1 }, { $set: { v: 2 }, $unset: { gone: '' } });
  const evs = [await cs.next(), await cs.next()];
  // updateLookup reads the document when the event is returned: before the next writes.
  assert.deepEqual(evs[1].fullDocument, { _id: 1, v: 2 }, 'updateLookup reads the current document');
  await c.replaceOne({ _id: 1 }, { v: 3 });
  await c.deleteOne({ _id: 1 });
  evs.push(await cs.next(), await cs.next());
  assert.deepEqual(evs.map((e) => e.operationType), ['insert', 'update', 'replace', 'delete']);
  assert.deepEqual(evs[0].fullDocument, { _id: 1, v: 1, gone: true });
  assert.deepEqual(evs[1].updateDescription.updatedFields, { v: 2 });
  assert.deepEqual(evs[1].updateDescription.removedFields, ['gone']);
  assert.deepEqual(evs[2].fullDocument, { _id: 1, v: 3 });
  assert.deepEqual(evs[3].documentKey, { _id: 1 });
  assert.equal(evs[0].ns.coll, 'c');
  assert.ok(evs[0].clusterTime && evs[0].wallTime instanceof Date);
});

test('pre- and post-images', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const db = client.db(uniqueDB('cspre'));
  const c = await db.createCollection('c', { changeStreamPreAndPostImages: { enabled: true } });
  await c.insertOne({ _id: 1, v: 'old' });
  const cs = c.watch([], { fullDocument: 'required', fullDocumentBeforeChange: 'required' });
  defer(t, () => cs.close());
  await cs.tryNext();
  await c.updateOne({ _id: 1 }, { $set: { v: 'new' } });
  await c.deleteOne({ _id: 1 });
  const upd = await cs.next();
  assert.deepEqual(upd.fullDocumentBeforeChange, { _id: 1, v: 'old' });
  assert.deepEqual(upd.fullDocument, { _id: 1, v: 'new' });
  const del = await cs.next();
  assert.deepEqual(del.fullDocumentBeforeChange, { _id: 1, v: 'new' });
});

test('resumeAfter, startAfter and startAtOperationTime', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('csresume')).collection('c');
  await c.insertOne({ _id: 0 });
  const cs = c.watch();
  await cs.tryNext();
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  const first = await cs.next();
  const second = await cs.next();
  await cs.close();
  assert.equal(first.documentKey._id, 1);

  const resumed = c.watch([], { resumeAfter: first._id });
  assert.equal((await resumed.next()).documentKey._id, 2);
  await resumed.close();
  const started = c.watch([], { startAfter: second._id });
  assert.equal((await started.next()).documentKey._id, 3);
  await started.close();
  const atTime = c.watch([], { startAtOperationTime: first.clusterTime });
  assert.equal((await atTime.next()).documentKey._id, 1);
  await atTime.close();
});

test('drop invalidates the stream; startAfter the invalidate continues', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('csinv')).collection('c');
  await c.insertOne({ _id: 0 });
  const cs = c.watch();
  await cs.tryNext();
  await c.insertOne({ _id: 1 });
  await c.drop();
  assert.equal((await cs.next()).operationType, 'insert');
  assert.equal((await cs.next()).operationType, 'drop');
  const inv = await cs.next();
  assert.equal(inv.operationType, 'invalidate');
  assert.equal(cs.closed, true, 'an invalidated stream closes');

  const after = c.watch([], { startAfter: inv._id });
  defer(t, () => after.close());
  await after.tryNext();
  await c.insertOne({ _id: 2 });
  const ev = await after.next();
  assert.equal(ev.operationType, 'insert');
  assert.equal(ev.documentKey._id, 2);
});

test('resumes transparently through failed getMores (error, closed connection)', async (t) => {
  // The fail points name this client's appName, so that other clients of the server (the
  // suite's other files, the other driver's run) are not affected.
  const appName = `watchtree-node-failpoint-${process.pid}`;
  // Driver 6.x leaves its server-selection timer of the resume after a closed connection
  // running past client.close() (7.x does not), which holds the test process for
  // serverSelectionTimeoutMS: a short one keeps the suite quick.
  const client = await connect({ monitorCommands: true, appName, serverSelectionTimeoutMS: 3000 });
  defer(t, () => client.close());
  const c = client.db(uniqueDB('csfail')).collection('c');
  await c.insertOne({ _id: 0 });
  let aggregates = 0;
  client.on('commandStarted', (e) => {
    if (e.commandName === 'aggregate' && e.command.aggregate === 'c') aggregates++;
  });
  const cs = c.watch();
  defer(t, () => cs.close());
  await cs.tryNext();
  // A failCommand error carries only the labels it is given: as on a server, the fail point
  // fires before the getMore knows that its cursor is a change stream's.
  const modes = [
    { errorCode: 10107, errorLabels: ['ResumableChangeStreamError'] }, // NotWritablePrimary
    { closeConnection: true },
  ];
  const ran = await withServerLock('failCommand', async () => {
    let id = 1;
    for (const data of modes) {
      const ok = await failPoint(client, 'failCommand', { mode: { times: 1 }, data: { failCommands: ['getMore'], appName, ...data } });
      if (!ok) return false;
      await c.insertOne({ _id: id });
      const ev = await cs.next();
      assert.equal(ev.documentKey._id, id, `event after a getMore failing with ${JSON.stringify(data)}`);
      id++;
    }
    await failPoint(client, 'failCommand', { mode: 'off' });
    return true;
  });
  if (!ran) {
    t.skip('the server has no configureFailPoint (enableTestCommands is off)');
    return;
  }
  assert.equal(aggregates, 1 + modes.length, 'one resume (a new aggregate) per failure');
});
