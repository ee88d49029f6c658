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
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan error, 1)}
	s.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()

	rdb := goredis.NewClient(&goredis.Options{Addr: s.addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := rdb.Ping(ctx).Err(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING: %w", s.addr, err)
		}
		select {
		case err := <-s.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server exited at start: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the server and removes its directory.
func (s *redisServer) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
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
