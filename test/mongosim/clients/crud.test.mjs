// CRUD, collection-level bulk writes and the 8.0 client-level bulkWrite through the official Node.js driver.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoBulkWriteError, MongoServerError, connect, uniqueDB, defer } from './helpers.mjs';

test('CRUD', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const db = client.db(uniqueDB('crud'));
  const c = db.collection('people');

  const one = await c.insertOne({ _id: 1, name: 'ada', age: 36, tags: ['math'] });
  assert.equal(one.insertedId, 1);
  const many = await c.insertMany([
    { _id: 2, name: 'grace', age: 45 },
    { _id: 3, name: 'alan', age: 41 },
    { _id: 4, name: 'edsger', age: 72 },
  ]);
  assert.equal(many.insertedCount, 3);

  const found = await c.find({ age: { $gt: 40 } }, { projection: { _id: 0, name: 1 } }).sort({ age: -1 }).skip(1).limit(2).toArray();
  assert.deepEqual(found, [{ name: 'grace' }, { name: 'alan' }]);
  assert.equal(await c.countDocuments({ age: { $lt: 50 } }), 3);
  assert.equal(await c.estimatedDocumentCount(), 4);
  assert.deepEqual((await c.distinct('age', { _id: { $in: [1, 2] } })).sort(), [36, 45]);

  const upd = await c.updateOne({ _id: 1 }, { $set: { age: 37 }, $push: { tags: 'engines' } });
  assert.equal(upd.matchedCount, 1);
  assert.equal(upd.modifiedCount, 1);
  const updMany = await c.updateMany({ age: { $gt: 40 } }, { $inc: { age: 1 } });
  assert.equal(updMany.modifiedCount, 3);
  const rep = await c.replaceOne({ _id: 4 }, { name: 'dijkstra', age: 72 });
  assert.equal(rep.modifiedCount, 1);
  const ups = await c.updateOne({ _id: 5 }, { $set: { name: 'barbara' } }, { upsert: true });
  assert.equal(ups.upsertedId, 5);

  const after = await c.findOneAndUpdate({ _id: 2 }, { $set: { age: 50 } }, { returnDocument: 'after' });
  assert.equal(after.age, 50);
  const removed = await c.findOneAndDelete({ _id: 5 });
  assert.equal(removed.name, 'barbara');
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, name: 'ada', age: 37, tags: ['math', 'engines'] });

  const groups = await c.aggregate([{ $group: { _id: null, total: { $sum: '$age' } } }]).toArray();
  assert.equal(groups[0].total, 37 + 50 + 42 + 72);

  await c.createIndex({ name: 1 }, { unique: true });
  await assert.rejects(c.insertOne({ name: 'ada' }), (err) => err instanceof MongoServerError && err.code === 11000);

  assert.equal((await c.deleteOne({ _id: 4 })).deletedCount, 1);
  assert.equal((await c.deleteMany({})).deletedCount, 3);
  assert.equal(await c.countDocuments(), 0);
});

test('collection bulkWrite: ordered and unordered, with a write error', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('bulk')).collection('c');
  const res = await c.bulkWrite([
    { insertOne: { document: { _id: 1, v: 1 } } },
    { insertOne: { document: { _id: 2, v: 2 } } },
    { updateOne: { filter: { _id: 1 }, update: { $set: { v: 10 } } } },
    { updateMany: { filter: {}, update: { $inc: { v: 1 } } } },
    { replaceOne: { filter: { _id: 2 }, replacement: { v: 20 } } },
    { updateOne: { filter: { _id: 3 }, update: { $set: { v: 3 } }, upsert: true } },
    { deleteOne: { filter: { _id: 1 } } },
  ]);
  assert.equal(res.insertedCount, 2);
  assert.equal(res.matchedCount, 4);
  assert.equal(res.modifiedCount, 4);
  assert.equal(res.upsertedCount, 1);
  assert.equal(res.deletedCount, 1);
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 2, v: 20 }, { _id: 3, v: 3 }]);

  // Unordered: the duplicate fails, the rest is applied.
  await assert.rejects(
    c.bulkWrite([
      { insertOne: { document: { _id: 2 } } },
      { insertOne: { document: { _id: 4 } } },
      { deleteMany: { filter: { _id: 3 } } },
    ], { ordered: false }),
    (err) => {
      assert.ok(err instanceof MongoBulkWriteError);
      assert.equal(err.writeErrors.length, 1);
      assert.equal(err.writeErrors[0].code, 11000);
      assert.equal(err.writeErrors[0].index, 0);
      assert.equal(err.result.insertedCount, 1);
      assert.equal(err.result.deletedCount, 1);
      return true;
    },
  );
  // Ordered: it stops at the duplicate.
  await assert.rejects(
    c.bulkWrite([{ insertOne: { document: { _id: 5 } } }, { insertOne: { document: { _id: 5 } } }, { insertOne: { document: { _id: 6 } } }]),
    (err) => err instanceof MongoBulkWriteError && err.writeErrors[0].index === 1,
  );
  assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d._id), [2, 4, 5]);
});

test('client bulkWrite (8.0): several namespaces, verbose results, an ordered write error', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const dbName = uniqueDB('cbulk');
  const a = `${dbName}.a`;
  const b = `${dbName}.b`;
  const res = await client.bulkWrite([
    { namespace: a, name: 'insertOne', document: { _id: 1, v: 1 } },
    { namespace: b, name: 'insertOne', document: { _id: 1, v: 10 } },
    { namespace: a, name: 'updateOne', filter: { _id: 1 }, update: { $inc: { v: 1 } } },
    { namespace: b, name: 'updateOne', filter: { _id: 2 }, update: { $set: { v: 20 } }, upsert: true },
    { namespace: a, name: 'replaceOne', filter: { _id: 1 }, replacement: { v: 5 } },
    { namespace: b, name: 'deleteOne', filter: { _id: 1 } },
  ], { verboseResults: true });
  assert.equal(res.insertedCount, 2);
  assert.equal(res.matchedCount, 2);
  assert.equal(res.modifiedCount, 2);
  assert.equal(res.upsertedCount, 1);
  assert.equal(res.deletedCount, 1);
  assert.equal(res.updateResults.get(3).upsertedId, 2);
  assert.deepEqual(await client.db(dbName).collection('a').findOne({ _id: 1 }), { _id: 1, v: 5 });
  assert.deepEqual(await client.db(dbName).collection('b').find().toArray(), [{ _id: 2, v: 20 }]);

  // Ordered: the duplicate key stops the batch; the write before it is applied, the one after not.
  await assert.rejects(client.bulkWrite([
    { namespace: a, name: 'insertOne', document: { _id: 2 } },
    { namespace: a, name: 'insertOne', document: { _id: 1 } },
    { namespace: a, name: 'insertOne', document: { _id: 3 } },
  ]), (err) => {
    assert.equal(err.name, 'MongoClientBulkWriteError');
    assert.equal(err.writeErrors.get(1).code, 11000);
    assert.equal(err.partialResult.insertedCount, 1);
    return true;
  });
  assert.equal(await client.db(dbName).collection('a').countDocuments(), 2);
});
