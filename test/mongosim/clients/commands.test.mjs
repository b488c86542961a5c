// What operators and mongosh call: rs.status(), rs.conf(), getParameter, explain, currentOp,
// $collStats, validate, getCmdLineOpts, the system databases and local.oplog.rs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MongoServerError, connect, uniqueDB, waitFor, defer } from './helpers.mjs';

test('hello, replSetGetStatus, replSetGetConfig, local.system.replset', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const admin = client.db('admin');
  const hello = await admin.command({ hello: 1 });
  assert.equal(hello.isWritablePrimary, true);
  const st = await admin.command({ replSetGetStatus: 1 });
  assert.equal(st.myState, 1);
  assert.equal(st.set, hello.setName);
  const me = st.members.find((m) => m.self);
  assert.equal(me.stateStr, 'PRIMARY');
  assert.equal(me.name, hello.me);
  assert.ok(st.optimes.appliedOpTime.ts);
  const { config } = await admin.command({ replSetGetConfig: 1 });
  assert.equal(config._id, hello.setName);
  assert.ok(config.members.some((m) => m.host === hello.me));
  const stored = await client.db('local').collection('system.replset').findOne();
  assert.equal(stored._id, hello.setName);
});

test('getParameter: named, all, unknown', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const admin = client.db('admin');
  const p = await admin.command({ getParameter: 1, featureCompatibilityVersion: 1, requireApiVersion: 1 });
  assert.match(p.featureCompatibilityVersion.version, /^\d+\.\d+$/);
  assert.equal(p.requireApiVersion, false);
  const all = await admin.command({ getParameter: '*' });
  assert.ok('featureCompatibilityVersion' in all && 'requireApiVersion' in all);
  await assert.rejects(admin.command({ getParameter: 1, noSuchParameterAnywhere: 1 }),
    (err) => err instanceof MongoServerError && err.code === 72 && err.message === 'no option found to get');
});

test('explain of find, aggregate, count and distinct', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('explain')).collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 2 }, { _id: 3, a: 1 }]);
  const ex = await c.find({ a: 1 }).sort({ _id: -1 }).explain('executionStats');
  assert.equal(ex.queryPlanner.namespace, c.namespace);
  assert.equal(ex.queryPlanner.winningPlan.stage, 'SORT');
  assert.equal(ex.queryPlanner.winningPlan.inputStage.stage, 'COLLSCAN');
  assert.equal(ex.executionStats.nReturned, 2);
  const agg = await c.aggregate([{ $match: { a: 1 } }, { $group: { _id: '$a', n: { $sum: 1 } } }]).explain('queryPlanner');
  const planner = agg.queryPlanner ?? agg.stages?.[0]?.$cursor?.queryPlanner;
  assert.ok(planner?.winningPlan, `aggregate explain: ${JSON.stringify(agg)}`);
  const cnt = await c.db.command({ explain: { count: 'c', query: { a: 1 } }, verbosity: 'executionStats' });
  assert.equal(cnt.executionStats.nReturned, 2);
  const dis = await c.db.command({ explain: { distinct: 'c', key: 'a' }, verbosity: 'queryPlanner' });
  assert.equal(dis.queryPlanner.namespace, c.namespace);
});

test('currentOp and $currentOp find a change stream by its comment', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const c = client.db(uniqueDB('curop')).collection('c');
  await c.insertOne({ _id: 0 });
  const comment = `watchtree:node-${process.pid}`;
  const cs = c.watch([], { comment, maxAwaitTimeMS: 1000 });
  defer(t, () => cs.close());
  await cs.tryNext();
  const pending = cs.next(); // a getMore now waits on the server
  const admin = client.db('admin');
  const op = await waitFor('the stream to appear in currentOp', async () => {
    const { inprog } = await admin.command({ currentOp: 1, 'cursor.originatingCommand.comment': comment });
    return inprog[0];
  });
  assert.equal(op.op, 'getmore');
  assert.equal(op.ns, c.namespace);
  assert.equal(op.command.comment, comment);
  const viaAgg = await admin.aggregate([
    { $currentOp: { allUsers: true, idleCursors: true } },
    { $match: { 'cursor.originatingCommand.comment': comment } },
  ]).toArray();
  assert.equal(viaAgg.length, 1);
  await c.insertOne({ _id: 1 });
  assert.equal((await pending).documentKey._id, 1);
});

test('$collStats, validate, getCmdLineOpts', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const db = client.db(uniqueDB('stats'));
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, x: 'a' }, { _id: 2, x: 'b' }]);
  const [stats] = await c.aggregate([{ $collStats: { storageStats: {}, count: {} } }]).toArray();
  assert.equal(stats.ns, c.namespace);
  assert.equal(stats.storageStats.count, 2);
  assert.ok(stats.storageStats.size > 0);
  assert.equal(stats.count.count, 2);
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true);
  assert.equal(v.nrecords, 2);
  const opts = await client.db('admin').command({ getCmdLineOpts: 1 });
  assert.ok(Array.isArray(opts.argv) && opts.parsed.net.port > 0);
});

test('admin, config and local exist; local.oplog.rs gives the oplog window', async (t) => {
  const client = await connect();
  defer(t, () => client.close());
  const { databases } = await client.db('admin').admin().listDatabases();
  const names = databases.map((d) => d.name);
  for (const n of ['admin', 'config', 'local']) assert.ok(names.includes(n), `${n} in ${names}`);
  const c = client.db(uniqueDB('oplog')).collection('c');
  await c.insertOne({ _id: 'last-write' });
  const oplog = client.db('local').collection('oplog.rs');
  const first = await oplog.find().sort({ $natural: 1 }).limit(1).next();
  const last = await oplog.find().sort({ $natural: -1 }).limit(1).next();
  assert.ok(first.ts && first.wall instanceof Date);
  assert.ok(last.ts && last.wall instanceof Date);
  assert.ok(last.ts.greaterThanOrEqual ? last.ts.greaterThanOrEqual(first.ts) : last.ts >= first.ts);
  const mine = await oplog.findOne({ op: 'i', ns: c.namespace });
  assert.deepEqual(mine.o, { _id: 'last-write' });
  const [stats] = await oplog.aggregate([{ $collStats: { storageStats: {} } }]).toArray();
  assert.equal(stats.storageStats.capped, true);
  assert.ok(stats.storageStats.maxSize > 0);
});
