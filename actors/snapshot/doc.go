// Package snapshot is the snapshot actor of a stream tree: it copies the documents that already
// exist in the stream's collection through the stream's handlers, before the change stream
// opens, without a gap and resumably.
//
// The checkpointer decides that a snapshot runs (the first start of a stream with a snapshot
// mode, or lost history under RebuildFromSnapshot): it captures the stream's position, writes
// the snapshot record (store.Snapshot, state running) and only then persists the position as the
// checkpoint, and names the snapshot in its StartFrom. The stream actor asks this actor to run
// it (RunSnapshot) and opens the change stream from the handoff position once it answered
// SnapshotFinished, so every change made while the documents were read is delivered after them.
//
// A run plans the _id ranges once (Source.Plan: split points at equal counts of the matching
// documents, read on the _id index), persists the plan, and reads each range on a goroutine of
// its own, in chunks of BatchSize documents in _id order, one chunk read ahead. Each document
// becomes, on its range's goroutine, a snapshot event (operationType "snapshot", the document as fullDocument, its _id as
// documentKey, and an _id._data that is stable for the document within this snapshot) and goes
// to the dispatcher's lanes within the dispatcher's snapshot credit (SnapshotSubscribe,
// SnapshotDemand, SnapshotBatch), where it gets the stream's retries and dead letters like any
// change event. Settlements come back (SnapshotSettled); the range's progress (the _id of the
// last document settled with every earlier one) is saved on every ProgressInterval, and the end
// of each chunk is saved before the range's next chunk is dispatched, so after a crash at most
// one chunk per range is read and handled again, finished ranges never. When every range is
// done the record says so (state done), and a finished snapshot never runs again.
//
// Blocking I/O never runs on the actor goroutine: the record loads and saves, the planning and
// the oplog-window reads run on the actor's worker goroutine, the range reads on the range
// goroutines; all of them belong to one run and end with its context (a CancelSnapshot, a new
// run, the actor stopping). Their results come back as messages stamped with the run number,
// and those of an older run are dropped.
package snapshot
