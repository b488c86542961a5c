package treekit

import (
	"go.uber.org/zap"

	"github.com/watchtree/watchtree/internal/clock"
	"github.com/watchtree/watchtree/internal/logx"
)

// Defaults fills the fields every actor config of a stream tree defaults alike: a nil clock
// reads the real time, a nil logger discards, and the logger names the stream on every line
// (logx.With keeps the no-op logger as it is). The configs differ in everything else, so they
// pass their own fields rather than share a struct that would change their exported API.
func Defaults(stream string, clk *clock.Clock, log **zap.Logger) {
	if *clk == nil {
		*clk = clock.Real()
	}
	if *log == nil {
		*log = zap.NewNop()
	}
	*log = logx.With(*log, zap.String("stream", stream))
}
