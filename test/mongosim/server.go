package mongosim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Options configures a simulated replica-set primary. The zero value is a usable default.
type Options struct {
	// Addr is the TCP address to listen on. Default "127.0.0.1:0" (a free loopback port).
	Addr string
	// ReplicaSet is the replica-set name reported by hello. Default "rs0".
	ReplicaSet string
	// WireVersion is the maxWireVersion reported by hello: 21 (MongoDB 7.0) or 25 (8.0).
	// Default 25.
	WireVersion int
	// OplogCapacity bounds the retained change history, in oplog entries (one per changed
	// document, plus one per drop/rename/dropDatabase). When it is exceeded the oldest entries
	// are discarded, and resuming from a token older than the retained history fails with
	// ChangeStreamHistoryLost (286). Default 1,000,000. Memory use is bounded by it.
	OplogCapacity int
	// OplogRetention, when positive, also discards entries whose wall time is older than this
	// age. Default 0 (no age limit).
	OplogRetention time.Duration
	// TTLMonitorInterval is how often expired documents of TTL indexes are deleted.
	// Default 60s, as on a real server.
	TTLMonitorInterval time.Duration
	// NoopInterval is how long the oplog may stay idle before the periodic no-op writer logs a
	// no-op entry, as a replica set's writePeriodicNoops does: the cluster time then advances,
	// and so does an idle change stream's postBatchResumeToken. It is measured on Options.Now
	// (checked at least every second of real time), and a stepped-down node writes none. No
	// change stream shows the entry; local.oplog.rs shows it as {op: "n", o: {msg: "periodic
	// noop"}}. Default 0 means 10s, as on a server; negative turns the writer off.
	NoopInterval time.Duration
	// Now is the wall clock used for cluster times, $$NOW, wallTime and TTL expiry.
	// Default time.Now. Tests inject a fake clock here.
	Now func() time.Time
	// DefaultAwaitTime is how long a change-stream getMore waits for events when the
	// request carries no maxTimeMS. Default 1s, as on a real server.
	DefaultAwaitTime time.Duration
	// HelloAwaitLimit caps how long an awaitable hello (the driver's streaming heartbeat) is
	// held when the topology does not change. A real server holds it for the client's full
	// maxAwaitTimeMS (its heartbeat interval, 10s by default); mongosim answers after at most
	// this long, so that a client which misses its own cancellation of that hello (a race in
	// driver v2.10.0's Disconnect and pool clearing) stalls at most this long instead of 10s.
	// Topology changes (StepDown, re-election) still answer every held hello at once.
	// Default 1s.
	HelloAwaitLimit time.Duration
	// CursorTimeout closes cursors (find, aggregate and change streams) that no getMore has
	// used for this long, as a real server's cursorTimeoutMillis does; a later getMore gets
	// CursorNotFound (43). Default 10 minutes.
	CursorTimeout time.Duration
	// TransactionLifetimeLimit is how long a multi-document transaction may stay open, as a
	// real server's transactionLifetimeLimitSeconds: an older one is aborted when it next
	// blocks another write or runs a command (which then fails with NoSuchTransaction, 251).
	// Default 60s.
	TransactionLifetimeLimit time.Duration
	// SnapshotHistory is how long the document versions that writes replace are kept for
	// snapshot reads, as a server's minSnapshotHistoryWindowInSeconds: a snapshot read at a
	// cluster time older than this, or than the retained oplog, fails with SnapshotTooOld
	// (239). Every update, replace and delete within the window keeps the version it replaced
	// in memory. Default 5 minutes, as on a server; negative keeps none (a snapshot read then
	// succeeds only while nothing it reads has changed since its time).
	SnapshotHistory time.Duration
}

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.ReplicaSet == "" {
		o.ReplicaSet = "rs0"
	}
	if o.WireVersion == 0 {
		o.WireVersion = 25
	}
	if o.OplogCapacity == 0 {
		o.OplogCapacity = 1_000_000
	}
	if o.TTLMonitorInterval == 0 {
		o.TTLMonitorInterval = 60 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NoopInterval == 0 {
		o.NoopInterval = 10 * time.Second
	}
	if o.DefaultAwaitTime == 0 {
		o.DefaultAwaitTime = time.Second
	}
	if o.HelloAwaitLimit == 0 {
		o.HelloAwaitLimit = time.Second
	}
	if o.CursorTimeout == 0 {
		o.CursorTimeout = 10 * time.Minute
	}
	if o.TransactionLifetimeLimit == 0 {
		o.TransactionLifetimeLimit = 60 * time.Second
	}
	if o.SnapshotHistory == 0 {
		o.SnapshotHistory = 5 * time.Minute
	}
	return o
}

// Validate reports the first invalid field of o, by name.
func (o Options) Validate() error {
	if o.WireVersion != 0 && o.WireVersion != 21 && o.WireVersion != 25 {
		return fmt.Errorf("mongosim: Options.WireVersion must be 21 or 25, got %d", o.WireVersion)
	}
	if o.OplogCapacity < 0 {
		return fmt.Errorf("mongosim: Options.OplogCapacity must be >= 0, got %d", o.OplogCapacity)
	}
	if o.OplogRetention < 0 {
		return fmt.Errorf("mongosim: Options.OplogRetention must be >= 0, got %s", o.OplogRetention)
	}
	if o.TTLMonitorInterval < 0 {
		return fmt.Errorf("mongosim: Options.TTLMonitorInterval must be >= 0, got %s", o.TTLMonitorInterval)
	}
	if o.DefaultAwaitTime < 0 {
		return fmt.Errorf("mongosim: Options.DefaultAwaitTime must be >= 0, got %s", o.DefaultAwaitTime)
	}
	if o.CursorTimeout < 0 {
		return fmt.Errorf("mongosim: Options.CursorTimeout must be >= 0, got %s", o.CursorTimeout)
	}
	if o.TransactionLifetimeLimit < 0 {
		return fmt.Errorf("mongosim: Options.TransactionLifetimeLimit must be >= 0, got %s", o.TransactionLifetimeLimit)
	}
	if o.HelloAwaitLimit < 0 {
		return fmt.Errorf("mongosim: Options.HelloAwaitLimit must be >= 0, got %s", o.HelloAwaitLimit)
	}
	return nil
}

// ErrClosed is returned by hooks called after Close.
var ErrClosed = errors.New("mongosim: server closed")

// Server is a running simulated replica-set primary. All methods are safe for concurrent use.
type Server struct {
	opts Options
	ln   net.Listener
	addr string

	eng *engine

	connMu   sync.Mutex
	conns    map[*conn]struct{}
	nextConn int32

	cmdLog commandLog
	fp     failPoints
	state  nodeState

	closing chan struct{}
	closed  sync.Once
	wg      sync.WaitGroup // accept loop, connections, background monitors
}

// Start listens on opts.Addr and serves until Close. The context bounds only the start-up.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("mongosim: listen on %s: %w", opts.Addr, err)
	}
	s := &Server{
		opts:    opts,
		ln:      ln,
		addr:    ln.Addr().String(),
		conns:   make(map[*conn]struct{}),
		closing: make(chan struct{}),
	}
	s.state.init()
	s.eng = newEngine(s)
	s.eng.mu.Lock()
	s.eng.createSystemCollectionsLocked()
	s.eng.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop()
	s.eng.startBackground()
	return s, nil
}

// Addr returns the host:port the server listens on, exactly as hello reports it in hosts and me.
func (s *Server) Addr() string { return s.addr }

// URI returns a connection string for the official driver, naming the replica set.
func (s *Server) URI() string {
	return "mongodb://" + s.addr + "/?replicaSet=" + s.opts.ReplicaSet
}

// Close stops accepting, closes every connection, wakes every waiting getMore and waits for
// all of the server's goroutines to end. It is idempotent.
func (s *Server) Close() error {
	s.closed.Do(func() {
		close(s.closing)
		_ = s.ln.Close()
		s.KillAllConnections()
		s.eng.shutdown()
	})
	s.wg.Wait()
	return nil
}

func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.isClosing() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		c := s.newConn(nc)
		s.connMu.Lock()
		if s.isClosing() {
			s.connMu.Unlock()
			_ = nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.connMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.connMu.Lock()
			delete(s.conns, c)
			s.connMu.Unlock()
		}()
	}
}

// KillAllConnections closes every open client connection at once, as a network partition or a
// server restart would. Clients see a network error; the data is kept.
func (s *Server) KillAllConnections() {
	s.connMu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.connMu.Unlock()
	for _, c := range cs {
		c.kill()
	}
}

// ConnectionCount returns the number of open client connections.
func (s *Server) ConnectionCount() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return len(s.conns)
}
