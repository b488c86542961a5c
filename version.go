package watchtree

import "github.com/watchtree/watchtree/internal/engine"

// Version returns watchtree's module version as built into the program: the version of
// github.com/watchtree/watchtree the program requires ("v0.3.0", or a pseudo-version),
// "(devel)" when the program is watchtree's own (built in a checkout), and "unknown" when the
// binary carries no build information. The console's instance info, the Prometheus adapter's
// watchtree_build_info and the OpenTelemetry adapter's instrumentation scope all report it: one
// version, read in one place.
func Version() string { return engine.ModuleVersion() }
