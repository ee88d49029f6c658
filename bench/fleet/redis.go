package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// redisServer is a redis-server process the benchmark owns: persistence off,
// its files in a temporary directory, on a free loopback port.
type redisServer struct {
	path string
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// startRedis starts the redis-server at path and waits until it answers
// PING.
func startRedis(ctx context.Context, path string) (*redisServer, error) {
	if _, err := exec.LookPath(path); err != nil {
		return nil, fmt.Errorf("redis-server not found at %q: install it or pass -redis-server: %w", path, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleet-redis-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{path: path, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	if err := s.launch(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launch starts the process on s.addr and waits until it answers PING.
func (s *redisServer) launch(ctx context.Context) error {
	_, port, _ := net.SplitHostPort(s.addr)
	s.done = make(chan error, 1)
	s.cmd = exec.Command(s.path, "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fmt.Errorf("start redis-server: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()

	rdb := goredis.NewClient(&goredis.Options{Addr: s.addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := rdb.Ping(ctx).Err(); err == nil {
			return nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			s.kill()
			return fmt.Errorf("redis-server on %s did not answer PING: %w", s.addr, err)
		}
		select {
		case err := <-s.done:
			s.cmd = nil
			return fmt.Errorf("redis-server exited at start: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// restart kills the server without warning and starts it again on the same
// address: like a Redis without persistence after a crash, it comes back
// empty, and clients reconnect to it.
func (s *redisServer) restart(ctx context.Context) error {
	s.kill()
	return s.launch(ctx)
}

// kill ends the process at once (SIGKILL) and waits for it.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// stop ends the server and removes its directory.
func (s *redisServer) stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
			s.cmd = nil
		case <-time.After(5 * time.Second):
			s.kill()
		}
	}
	os.RemoveAll(s.dir)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("find a free port: not a TCP address")
	}
	return addr.Port, nil
}
