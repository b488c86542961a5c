package chaos

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestProxyStallsAndHealsEachDirection: a partitioned direction holds the bytes sent (nothing
// arrives), the other still flows, and healing delivers what was held, in order.
func TestProxyStallsAndHealsEachDirection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server, line by line
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					l, err := rd.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(l)); err != nil {
						return
					}
				}
			}()
		}
	}()
	p, err := NewProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	readEcho := func(within time.Duration) (string, error) {
		_ = c.SetReadDeadline(time.Now().Add(within))
		return rd.ReadString('\n')
	}
	if _, err := c.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := readEcho(10 * time.Second); err != nil || got != "a\n" {
		t.Fatalf("before the partition: %q, %v", got, err)
	}
	for _, d := range []Direction{Up, Down, Both} {
		p.Partition(d)
		if _, err := c.Write([]byte("b\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := readEcho(300 * time.Millisecond); err == nil {
			t.Fatalf("direction %d partitioned, yet the echo came back: %q", d, got)
		}
		p.Heal()
		if got, err := readEcho(10 * time.Second); err != nil || got != "b\n" {
			t.Fatalf("after healing direction %d: %q, %v (the held bytes must arrive)", d, got, err)
		}
	}
}
