package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/watchtree/watchtree/test/chaos/history"
)

// loader is one writer of the load: it owns its keys, so the order of a key's writes is the
// order in which it commits them. Each key lives insert → updates → (maybe) delete, and is
// never reused, so a delete event names its write by key alone; a poison key is only
// inserted. Some writes go in transactions, a few in transactions aborted on purpose (fresh
// keys, which must never be handled).
type loader struct {
	id   int
	coll *mongo.Collection
	cl   *mongo.Client
	h    *history.Writer
	rng  *rand.Rand
	live []*liveKey
	n    int // keys created
}

type liveKey struct {
	key string
	seq int64
}

type op struct {
	key    string
	seq    int64
	kind   history.Op
	poison bool
}

func (l *loader) newKey(prefix string) string {
	l.n++
	return fmt.Sprintf("%s%d-%d", prefix, l.id, l.n)
}

// step makes one write (or one transaction).
func (l *loader) step(ctx context.Context) {
	r := l.rng.Float64()
	switch {
	case len(l.live) < 5 || r < 0.15:
		poison := l.rng.Float64() < 0.04
		k := l.newKey("k")
		o := op{key: k, seq: 1, kind: history.Insert, poison: poison}
		if l.single(ctx, o) && !poison {
			l.live = append(l.live, &liveKey{key: k, seq: 1})
		}
	case r < 0.65:
		lk := l.live[l.rng.IntN(len(l.live))]
		lk.seq++
		l.single(ctx, op{key: lk.key, seq: lk.seq, kind: history.Update})
	case r < 0.75:
		i := l.rng.IntN(len(l.live))
		lk := l.live[i]
		l.live = append(l.live[:i], l.live[i+1:]...)
		lk.seq++
		l.single(ctx, op{key: lk.key, seq: lk.seq, kind: history.Delete})
	case r < 0.95:
		var ops []op
		for _, j := range l.rng.Perm(len(l.live))[:2+l.rng.IntN(2)] {
			lk := l.live[j]
			lk.seq++
			ops = append(ops, op{key: lk.key, seq: lk.seq, kind: history.Update})
		}
		k := l.newKey("k")
		ops = append(ops, op{key: k, seq: 1, kind: history.Insert})
		if l.txn(ctx, ops, true) {
			l.live = append(l.live, &liveKey{key: k, seq: 1})
		}
	default:
		l.txn(ctx, []op{{key: l.newKey("a"), seq: 1, kind: history.Insert}, {key: l.newKey("a"), seq: 1, kind: history.Insert}}, false)
	}
}

func (l *loader) apply(ctx context.Context, o op) error {
	var err error
	switch o.kind {
	case history.Insert:
		_, err = l.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: o.key}, {Key: "seq", Value: o.seq}, {Key: "poison", Value: o.poison}})
	case history.Update:
		_, err = l.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: o.key}}, bson.D{{Key: "$set", Value: bson.D{{Key: "seq", Value: o.seq}}}})
	case history.Delete:
		_, err = l.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: o.key}})
	}
	return err
}

func (l *loader) record(o op, txn bool, out history.Outcome, err error) {
	r := history.Record{Type: history.Write, Key: o.key, Seq: o.seq, Op: o.kind, Txn: txn, Poison: o.poison, Outcome: out, Start: time.Now()}
	if err != nil {
		r.Err = err.Error()
	}
	l.h.Add(r)
}

// single makes one write; true when it committed.
func (l *loader) single(ctx context.Context, o op) bool {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := l.apply(wctx, o)
	if err != nil {
		l.record(o, false, history.Uncertain, err)
		return false
	}
	l.record(o, false, history.Committed, nil)
	return true
}

// txn makes ops in one transaction, committed or aborted on purpose; true when committed.
func (l *loader) txn(ctx context.Context, ops []op, commit bool) bool {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sess, err := l.cl.StartSession()
	if err != nil {
		for _, o := range ops {
			l.record(o, true, history.Aborted, err) // nothing was sent
		}
		return false
	}
	defer sess.EndSession(context.Background())
	err = sess.StartTransaction(options.Transaction())
	sctx := mongo.NewSessionContext(wctx, sess)
	for _, o := range ops {
		if err == nil {
			err = l.apply(sctx, o)
		}
	}
	switch {
	case err == nil && commit:
		err = sess.CommitTransaction(sctx)
	case err == nil:
		if aerr := sess.AbortTransaction(sctx); aerr != nil {
			for _, o := range ops {
				l.record(o, true, history.Uncertain, aerr)
			}
			return false
		}
		for _, o := range ops {
			l.record(o, true, history.Aborted, nil)
		}
		return false
	default:
		_ = sess.AbortTransaction(context.Background())
	}
	out := history.Committed
	if err != nil {
		out = history.Uncertain
	}
	for _, o := range ops {
		l.record(o, true, out, err)
	}
	return err == nil
}

// runLoad runs workers loaders, each making about rate/workers writes a second, until ctx ends.
func runLoad(ctx context.Context, cl *mongo.Client, coll *mongo.Collection, h *history.Writer, seed uint64, workers int, rate float64) <-chan struct{} {
	done := make(chan struct{})
	every := time.Duration(float64(time.Second) * float64(workers) / rate)
	go func() {
		defer close(done)
		fin := make(chan struct{}, workers)
		for i := range workers {
			l := &loader{id: i, coll: coll, cl: cl, h: h, rng: rand.New(rand.NewPCG(seed, uint64(i)+1))}
			go func() {
				defer func() { fin <- struct{}{} }()
				t := time.NewTicker(every)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
						l.step(ctx)
					}
				}
			}()
		}
		for range workers {
			<-fin
		}
	}()
	return done
}
