// Package leader is the leader actor of a SingleLeader stream: one per stream, a child of the
// stream's supervisor, holding the stream's lease in a lease store (Store) whose own clock
// judges expiry.
//
// Protocol (protobuf, proto/watchtree/internal/v1/leader.proto):
//   - Campaign (supervisor → leader): seek the lease. The actor is a standby until it acquires:
//     it tries every StandbyPoll, again exactly when the lease it saw expires (by the Remaining
//     the store reported), and at once when the store's watch reports a change (a release).
//   - LeaseGranted{epoch, expires_at} (leader → supervisor): acquired; the stream runs under
//     epoch, which Config.OnAcquired has already handed to the writers.
//   - As leader it renews every RenewEvery. A refused renewal, or no successful renewal by
//     lastRenewOk + TTL - Margin (lastRenewOk: when that renewal was sent, measured on the
//     clock's monotonic reading, clock.Mono, so that a jump of its wall time moves no deadline),
//     sends LeaseLost{why} and campaigns again: the stream has stopped before the store can give
//     the lease away.
//   - HandOver (leader → supervisor): above its fair share (Balancer), after a renewal.
//   - Resign{campaign_again, cooldown_ms} (supervisor → leader, a request) → Resigned: release
//     the lease, then go idle or back to standby. After a balance handover the standby leaves
//     the lease to the others for at least one renew period, after an operator's release for
//     cooldown_ms (the release window): a change notice meanwhile makes it read the lease
//     (GetLease), and an epoch above the released one (another instance took it) ends the
//     window; at its end it competes again, and leads again when nobody took the lease.
//   - Fenced (supervisor → leader): a write of the term was refused by a newer epoch.
//   - LeaseState (leader → supervisor) on every change of role, holder, epoch or expiry.
//
// Every store call runs on the actor's own I/O goroutine, bounded by Config.IOTimeout; results
// come back as messages stamped with the actor's generation, which changes with every role
// change, so a stale answer is dropped (a stale successful acquisition or renewal is released).
// Timers run on Config.Clock.
package leader
