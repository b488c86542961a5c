package engine

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/policyx"
	"github.com/watchtree/watchtree/store"
)

// maxSeedAttempts bounds fixLeaderStart's rounds of read and save when other instances' seeds
// land between them (one per instance spawning the stream at once, in practice).
const maxSeedAttempts = 5

// fixLeaderStart runs before a SingleLeader stream's tree is spawned (Spawn only; a tree built
// with Props is the user's to spawn). It does two things an AllInstances stream gets from its
// cursor opening before Spawn returns:
//
//   - It opens the stream's change stream once, with its pipeline, and closes it: a pipeline the
//     server refuses (a typo) fails Spawn here, in every role, instead of crashing the stream
//     later, when this instance takes the lease over (maybe after the healthy ones are gone).
//   - It fixes the start position. A stream with no checkpoint yet gets the position just
//     captured, saved as its checkpoint (Source "initial", epoch 0) before Spawn returns. Whoever
//     leads first, this instance or another one, resumes from there (a new leader claims it under
//     its own epoch), so that nothing written after Spawn returned is skipped, however long the
//     lease stays with a standby, a slow campaign or a dead holder.
//
// The position is captured before the checkpoint is read. Two instances spawning a new stream
// at once may both save theirs; a save replaces an earlier one only when it is the earlier
// position, and either covers every write made after its own Spawn returned: each capture
// precedes the other's read. Nothing is seeded for an Ephemeral stream (nothing is stored), a
// stream that snapshots first (the snapshot copies what was written meanwhile), a StartPosition
// At (its position is fixed by its time), or when a checkpoint exists (Latest then applies when
// this instance first leads, as documented).
func (e *Entry) fixLeaderStart(ctx context.Context) error {
	spec := e.spec
	if !spec.SingleLeader {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.rt.cfg.ConnectTimeout)
	defer cancel()
	tok, ts, err := e.positions().Current(ctx)
	if err != nil {
		return fmt.Errorf("watchtree: stream %q: its change stream does not open: %w", e.name, err)
	}
	kind := policyx.StartKindOf(spec.Start)
	if spec.Checkpoint.Ephemeral || spec.Snapshots() || kind == policyx.StartAt {
		return nil
	}
	scope := store.Scope{Stream: e.name}
	// Two instances spawning at once may each read no checkpoint, then save: the later
	// capture's save lands first, and the earlier one is refused as backward (store.ErrBackward)
	// though it is the one to keep. So a refused save reads the checkpoint again and decides
	// again, with the other instance's seed in view (a Rewind over a later seed, or nothing to do
	// over a leader's checkpoint). Each round sees a later stored position, so a few suffice.
	for attempt := 1; ; attempt++ {
		cp, found, err := e.store.checkpoints.Load(ctx, scope)
		if err != nil {
			return fmt.Errorf("watchtree: stream %q: read its checkpoint to fix the start position: %w", e.name, err)
		}
		if found && (cp.Token != nil || !cp.ClusterTime.IsZero()) {
			earlierSeed := cp.Epoch == 0 && cp.Source == store.SourceInitial && !cp.ClusterTime.IsZero() &&
				!ts.IsZero() && ts.Before(cp.ClusterTime)
			if !earlierSeed {
				return nil
			}
		}
		// Over an earlier seed, this one moves the position back on purpose: a Rewind, so that
		// what is committed after this Spawn returns is delivered too.
		seed := store.Checkpoint{Stream: e.name, Token: tok, ClusterTime: ts, Source: store.SourceInitial,
			Owner: e.rt.cfg.InstanceID, UpdatedAt: e.rt.clk.Now(), Rewind: found}
		err = e.store.checkpoints.Save(ctx, seed)
		switch {
		case errors.Is(err, store.ErrFenced):
			// A leader claimed a position meanwhile: that one is fixed.
			return nil
		case errors.Is(err, store.ErrBackward) && attempt < maxSeedAttempts:
			continue
		case err != nil:
			return fmt.Errorf("watchtree: stream %q: save its start position: %w", e.name, err)
		}
		break
	}
	// The tree resumes from the position saved here: Latest was just applied.
	e.resumeSeed = true
	e.log.Info("start position fixed at spawn", zap.String("source", store.SourceInitial),
		zap.Uint32("cluster_time_t", ts.T), zap.Uint32("cluster_time_i", ts.I))
	return nil
}
