// Package testnet has network helpers for tests.
package testnet

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback host:port that nothing listens on right now:
// free for a server under test to listen on, and refusing connections
// until one does.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testnet: listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("testnet: close: %v", err)
	}
	return addr
}
