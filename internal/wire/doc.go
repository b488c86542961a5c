// Package wire holds the private protobuf traffic between the actors of one stream tree: cursor
// batches and demand, settlements, checkpoint flushes, lease campaigns, snapshot chunks and the
// supervisor's own timers. Only protobuf crosses between actors, so the tree could be split over
// processes, but none of these messages is part of the public API. Generated from
// proto/watchtree/internal/v1 by `make proto`; the generated code is committed.
package wire
