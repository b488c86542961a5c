package chaos

import (
	"net"
	"sync"
)

// Direction is one way of a proxied link.
type Direction uint8

// The directions of a link: Up is node → server, Down is server → node.
const (
	Up Direction = 1 << iota
	Down
	Both = Up | Down
)

// Proxy forwards TCP connections from a node to one server (MongoDB or Redis), and partitions
// the link on demand, in either direction or both. A partitioned direction stalls: the bytes
// sent are held, as the network holds unacknowledged segments, and flow again when it heals,
// unless an end gave up and closed the connection first (the driver's timeouts then act as
// over a real partition). Only the loopback side of the link is simulated; the node's and the
// server's kernels are real.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	blocked Direction
	healed  chan struct{} // closed and replaced whenever blocked changes
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) { return NewProxyOn("127.0.0.1", target) }

// NewProxyOn listens on a free port of host and forwards to target.
func NewProxyOn(host, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, the one the node dials.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition stalls the directions d (added to those already stalled).
func (p *Proxy) Partition(d Direction) { p.set(func(b Direction) Direction { return b | d }) }

// Heal lets every direction flow again.
func (p *Proxy) Heal() { p.set(func(Direction) Direction { return 0 }) }

func (p *Proxy) set(f func(Direction) Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = f(p.blocked)
	close(p.healed)
	p.healed = make(chan struct{})
}

// Close stops accepting, closes every connection and waits for the copy goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	close(p.healed)
	p.healed = make(chan struct{})
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, s, Up)
		go p.pipe(s, c, Down)
	}
}

// wait blocks while d is stalled; false once the proxy is closed.
func (p *Proxy) wait(d Direction) bool {
	for {
		p.mu.Lock()
		blocked, healed, closed := p.blocked&d != 0, p.healed, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !blocked {
			return true
		}
		<-healed
	}
}

// pipe copies src to dst in direction d, holding the bytes while d is stalled; when either
// side ends, both connections close.
func (p *Proxy) pipe(src, dst net.Conn, d Direction) {
	defer p.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(d) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a reset: the link ends for both sides
			return
		}
	}
}
