// Transactions, and a write outside them waiting for the one that holds its document.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError, connect, uniqueDB, waitFor, defer } from './helpers.mjs';

test('withTransaction commits; abort discards', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('txn')).collection('accounts');
  await c.insertMany([{ _id: 'a', balance: 100 }, { _id: 'b', balance: 0 }]);
  await client.withSession((s) => s.withTransaction(async () => {
    await c.updateOne({ _id: 'a' }, { $inc: { balance: -30 } }, { session: s });
    await c.updateOne({ _id: 'b' }, { $inc: { balance: 30 } }, { session: s });
    assert.equal((await c.findOne({ _id: 'b' })).balance, 0, 'not visible outside before commit');
  }));
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 'a', balance: 70 }, { _id: 'b', balance: 30 }]);

  const s = client.startSession();
  s.startTransaction();
  await c.insertOne({ _id: 'c', balance: 5 }, { session: s });
  await s.abortTransaction();
  await s.endSession();
  assert.equal(await c.countDocuments({ _id: 'c' }), 0);
});

// Finds the outside update on the server's currentOp: proof that it is waiting there.
async function updateWaiting(client, ns) {
  const ops = await client.db('admin').aggregate([{ $currentOp: {} }, { $match: { ns, op: 'update', active: true } }]).toArray();
  return ops.length === 1;
}

test('a write outside the transaction waits for its commit, then applies', async (t) => {
  const client = await connect();
  const other = await connect();
  defer(t, () => client.close());
  defer(t, () => other.close());
  const db = uniqueDB('txnwait');
  const c = client.db(db).collection('c');
  await c.insertOne({ _id: 1, n: 0 });
  const s = client.startSession();
  defer(t, () => s.endSession());
  s.startTransaction();
  await c.updateOne({ _id: 1 }, { $set: { by: 'txn' } }, { session: s });

  let settled = false;
  const outside = other.db(db).collection('c').updateOne({ _id: 1 }, { $inc: { n: 1 } }).finally(() => { settled = true; });
  await waitFor('the outside update to wait on the server', () => updateWaiting(client, `${db}.c`));
  assert.equal(settled, false);
  await s.commitTransaction();
  const res = await outside;
  assert.equal(res.modifiedCount, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, n: 1, by: 'txn' });
});

test('the waiting write gives up at its maxTimeMS with MaxTimeMSExpired', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const db = client.db(uniqueDB('txnwait'));
  const c = db.collection('c');
  await c.insertOne({ _id: 1, n: 0 });
  const s = client.startSession();
  defer(t, () => s.endSession());
  s.startTransaction();
  await c.updateOne({ _id: 1 }, { $set: { by: 'txn' } }, { session: s });
  await assert.rejects(
    db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: { $inc: { n: 1 } } }], maxTimeMS: 200 }),
    (err) => err instanceof MongoServerError && err.code === 50 && err.codeName === 'MaxTimeMSExpired',
  );
  await s.commitTransaction();
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, n: 0, by: 'txn' });
});
