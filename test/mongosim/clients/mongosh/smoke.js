// make test-mongosh: what a user does in mongosh against mongosim. Every check throws on a
// wrong answer, which makes mongosh --file exit non-zero.
function check(cond, what, got) {
  if (!cond) throw new Error(`${what}: ${typeof got === 'string' ? got : EJSON.stringify(got)}`);
  print(`ok  ${what}`);
}

check(version() === process.env.WANT_MONGOSH, 'mongosh version', version());
check(db.hello().isWritablePrimary === true, 'db.hello().isWritablePrimary', db.hello());
const st = rs.status();
check(st.myState === 1 && st.members[0].stateStr === 'PRIMARY', 'rs.status() reports PRIMARY', st);
check(rs.conf()._id === st.set, 'rs.conf()', rs.conf());

const smoke = db.getSiblingDB('smoke');
const coll = smoke.getCollection('c');
check(coll.insertOne({ _id: 1, v: 'hello' }).acknowledged, 'insertOne', '');
check(coll.findOne({ _id: 1 }).v === 'hello', 'findOne', coll.findOne({ _id: 1 }));
check(coll.find().toArray().length === 1, 'find', '');

const cs = coll.watch([], { comment: 'watchtree:smoke' });
check(cs.tryNext() === null, 'watch: no event yet', '');
coll.updateOne({ _id: 1 }, { $set: { v: 'world' } });
let ev = null;
for (let i = 0; i < 50 && ev === null; i++) ev = cs.tryNext();
check(ev && ev.operationType === 'update' && ev.updateDescription.updatedFields.v === 'world', 'watch/tryNext sees the update', ev);

const ops = db.currentOp({ 'cursor.originatingCommand.comment': 'watchtree:smoke' });
check(Array.isArray(ops.inprog), 'db.currentOp() answers', ops);
const idle = db.getSiblingDB('admin').aggregate([
  { $currentOp: { idleCursors: true } },
  { $match: { 'cursor.originatingCommand.comment': 'watchtree:smoke' } },
]).toArray();
check(idle.length === 1, '$currentOp finds the stream by its comment', idle);
cs.close();

const stats = coll.stats();
check(stats.count === 1 && stats.size > 0, 'db.coll.stats()', stats);
check(coll.dataSize() === stats.size, 'db.coll.dataSize()', coll.dataSize());
check(coll.validate().valid === true, 'db.coll.validate()', coll.validate());
check(coll.find({ _id: 1 }).explain().queryPlanner.namespace === 'smoke.c', 'explain()', '');

const dbs = db.adminCommand({ listDatabases: 1 }).databases.map((d) => d.name);
check(['admin', 'config', 'local', 'smoke'].every((n) => dbs.includes(n)), 'show dbs', dbs);
const info = db.getReplicationInfo();
check(info.timeDiff >= 0 && info.tFirst && info.tLast, 'db.getReplicationInfo() (rs.printReplicationInfo)', info);
rs.printReplicationInfo();
const fcv = db.adminCommand({ getParameter: 1, featureCompatibilityVersion: 1 });
check(/^\d+\.\d+$/.test(fcv.featureCompatibilityVersion.version), 'getParameter featureCompatibilityVersion', fcv);
