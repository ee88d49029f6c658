package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
)

// Environment variables read by StartServer, StartProcess and StartCluster.
// None of them is the worker's REDIS_URL: a shell set up for a fleet can run
// the tests without lending them the fleet's Redis.
const (
	// EnvURL names an existing Redis database for the tests to use instead
	// of starting a server. It must be empty when a test starts; the test
	// empties it again when it ends.
	EnvURL = "TOLLGATE_TEST_REDIS_URL"
	// EnvServer names the redis-server binary to start (a name looked up on
	// PATH, or a path); empty means DefaultServer. Setting it to a name that
	// does not exist shows what a machine without Redis does.
	EnvServer = "TOLLGATE_TEST_REDIS_SERVER"
	// EnvRequire, set to "1", fails tests when redis-server cannot be found
	// instead of falling back to miniredis or skipping.
	EnvRequire = "TOLLGATE_TEST_REQUIRE_REDIS"
)

// DefaultServer is the redis-server binary used when EnvServer is empty.
const DefaultServer = "redis-server"

// installHint is how to get redis-server (and redis-cli).
const installHint = "apt-get install redis-server, or brew install redis"

// startTimeout bounds how long a starting redis-server may take to answer PING.
const startTimeout = 10 * time.Second

// Backend says what kind of server a Server runs.
type Backend uint8

// The backends.
const (
	// Real is a redis-server process started by the test.
	Real Backend = iota + 1
	// External is the database TOLLGATE_TEST_REDIS_URL names; the test
	// does not own its server.
	External
	// Mini is an in-process miniredis, used when redis-server is missing.
	// It runs the same Lua script, on gopher-lua instead of Redis's Lua.
	Mini
)

// String returns "redis-server", "external" or "miniredis".
func (b Backend) String() string {
	switch b {
	case Real:
		return "redis-server"
	case External:
		return "external"
	case Mini:
		return "miniredis"
	}
	return "backend(" + strconv.Itoa(int(b)) + ")"
}

// Server is one Redis server owned by (or, for TOLLGATE_TEST_REDIS_URL,
// lent to) a test. Its methods must be called from the test's goroutine; the
// clients it returns are safe for concurrent use.
type Server struct {
	t       testing.TB
	backend Backend
	url     string // External only
	bin     string // Real: the redis-server binary
	addr    string
	dir     string
	cmd     *exec.Cmd     // Real, while running
	exited  chan struct{} // Real, closed when cmd exits
	mini    *miniredis.Miniredis
}

// Start returns a client to a fresh Redis server (see StartServer); the
// server is stopped and the client closed when the test ends.
func Start(t testing.TB) *goredis.Client {
	t.Helper()
	return StartServer(t).Client()
}

// StartServer starts a fresh redis-server on a free loopback port, with
// persistence off and its files in t.TempDir(), waits until it answers PING
// and stops it at t.Cleanup. With TOLLGATE_TEST_REDIS_URL set it uses that
// database instead (see EnvURL); with no redis-server (see EnvServer) it
// falls back to miniredis, or fails the test if
// TOLLGATE_TEST_REQUIRE_REDIS=1. It never reads the worker's REDIS_URL.
func StartServer(t testing.TB) *Server {
	t.Helper()
	backend, bin, err := chooseBackend(os.Getenv, exec.LookPath)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, backend: backend, bin: bin}
	switch backend {
	case External:
		s.startExternal(os.Getenv(EnvURL))
	case Mini:
		s.startMini()
	case Real:
		s.dir = t.TempDir()
		s.startReal()
	}
	t.Cleanup(s.shutdown)
	return s
}

// StartProcess starts a fresh redis-server as StartServer does, for a test
// that needs the real process, not a stand-in: one that reconfigures it
// (CONFIG SET) or relies on what miniredis does not do. It always starts
// its own process, TOLLGATE_TEST_REDIS_URL or not. Without redis-server
// the test is skipped with one line saying how to install it, or fails if
// TOLLGATE_TEST_REQUIRE_REDIS=1.
func StartProcess(t testing.TB, why string) *Server {
	t.Helper()
	bin := needBinary(t, os.Getenv, exec.LookPath, why)
	s := &Server{t: t, backend: Real, bin: bin, dir: t.TempDir()}
	s.startReal()
	t.Cleanup(s.shutdown)
	return s
}

// StartMini starts an in-process miniredis, whatever the machine has, and
// stops it at t.Cleanup: for tests that show code runs on the stand-in a
// machine without redis-server uses (its Lua is gopher-lua, not Redis's).
func StartMini(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, backend: Mini}
	s.startMini()
	t.Cleanup(s.shutdown)
	return s
}

// serverName is the redis-server binary the environment names.
func serverName(getenv func(string) string) string {
	if name := getenv(EnvServer); name != "" {
		return name
	}
	return DefaultServer
}

// chooseBackend decides where the server comes from, given the environment
// and a PATH lookup; bin is the redis-server binary for Real.
func chooseBackend(getenv func(string) string, lookPath func(string) (string, error)) (b Backend, bin string, err error) {
	if getenv(EnvURL) != "" {
		return External, "", nil
	}
	name := serverName(getenv)
	if bin, err := lookPath(name); err == nil {
		return Real, bin, nil
	}
	if getenv(EnvRequire) == "1" {
		return 0, "", fmt.Errorf("redistest: %s is not found and %s=1: install it (%s), set %s to its path, or point %s at an empty database",
			name, EnvRequire, installHint, EnvServer, EnvURL)
	}
	return Mini, "", nil
}

// needBinary finds the redis-server binary for a test that needs a real
// process (what says what for), or skips the test with one line, or fails
// it if TOLLGATE_TEST_REQUIRE_REDIS=1.
func needBinary(t testing.TB, getenv func(string) string, lookPath func(string) (string, error), what string) string {
	t.Helper()
	name := serverName(getenv)
	bin, err := lookPath(name)
	if err == nil {
		return bin
	}
	msg := missingMessage(name, what)
	if getenv(EnvRequire) == "1" {
		t.Fatalf("%s; %s=1", msg, EnvRequire)
	}
	t.Skip(msg)
	return ""
}

// missingMessage is the one line a test skipped for want of name prints.
func missingMessage(name, what string) string {
	return fmt.Sprintf("redistest: %s needs a real redis-server, and %s is not found (%s)", what, name, installHint)
}

// Backend reports what kind of server s is.
func (s *Server) Backend() Backend { return s.backend }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL returns a redis:// URL for the server (TOLLGATE_TEST_REDIS_URL itself
// for External).
func (s *Server) URL() string {
	if s.backend == External {
		return s.url
	}
	return "redis://" + s.addr + "/0"
}

// Options returns fresh client options for the server, for callers that want
// to change timeouts or pool sizes before building a client.
func (s *Server) Options() *goredis.Options {
	s.t.Helper()
	opts, err := goredis.ParseURL(s.URL())
	if err != nil {
		s.t.Fatalf("redistest: parse %q: %v", s.URL(), err)
	}
	return opts
}

// Client returns a new client to the server, closed when the test ends.
func (s *Server) Client() *goredis.Client {
	s.t.Helper()
	c := goredis.NewClient(s.Options())
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop stops the server, as an outage would: clients then fail to connect.
// Stopping a stopped server does nothing. For External the test is skipped
// (or fails if TOLLGATE_TEST_REQUIRE_REDIS=1), since the server is not the
// test's to stop.
func (s *Server) Stop() {
	s.t.Helper()
	switch s.backend {
	case External:
		s.notOurs("stop")
	case Mini:
		s.mini.Close()
	case Real:
		s.stopReal()
	}
}

// Restart stops the server if it runs and starts it again on the same
// address. Like a Redis without persistence after a crash, it comes back
// empty. For External the test is skipped, as for Stop.
func (s *Server) Restart() {
	s.t.Helper()
	switch s.backend {
	case External:
		s.notOurs("restart")
	case Mini:
		s.mini.Close()
		if err := s.mini.Restart(); err != nil {
			s.t.Fatalf("redistest: restart miniredis on %s: %v", s.addr, err)
		}
		s.mini.FlushAll()
	case Real:
		s.stopReal()
		if err := s.launch(); err != nil {
			s.t.Fatalf("redistest: restart %s on %s: %v", s.bin, s.addr, err)
		}
	}
}

// notOurs skips (or, under TOLLGATE_TEST_REQUIRE_REDIS=1, fails) a test
// that would stop or restart an External server.
func (s *Server) notOurs(verb string) {
	s.t.Helper()
	msg := fmt.Sprintf("redistest: %s points at a server a test cannot %s; unset it to run this test on a redis-server of its own", EnvURL, verb)
	if os.Getenv(EnvRequire) == "1" {
		s.t.Fatalf("%s; %s=1", msg, EnvRequire)
	}
	s.t.Skip(msg)
}

func (s *Server) shutdown() {
	switch s.backend {
	case External:
		s.emptyExternal()
	case Mini:
		s.mini.Close()
	case Real:
		s.stopReal()
	}
}

// startExternal checks that the database url names answers and is empty:
// the test writes every key it will hold, so emptying it at the end
// (emptyExternal) removes only what the test wrote. A database holding keys
// is someone else's, and the test fails without touching it.
func (s *Server) startExternal(url string) {
	s.t.Helper()
	s.url = url
	opts, err := goredis.ParseURL(url)
	if err != nil {
		s.t.Fatalf("redistest: %s=%q: %v: use a URL such as redis://127.0.0.1:6379/15", EnvURL, url, err)
	}
	s.addr = opts.Addr
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		s.t.Fatalf("redistest: %s=%q: %v", EnvURL, url, err)
	}
	if n != 0 {
		s.t.Fatalf("redistest: %s=%q holds %d keys this test did not write; tests use only an empty database, one package at a time (go test -p 1), and empty it when they end: point %s at an empty database of its own",
			EnvURL, url, n, EnvURL)
	}
}

// emptyExternal removes what the test wrote to its External database,
// which was empty when it started.
func (s *Server) emptyExternal() {
	opts, err := goredis.ParseURL(s.url)
	if err != nil {
		return
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.FlushDB(ctx).Err(); err != nil {
		s.t.Errorf("redistest: empty %s=%q after the test: %v", EnvURL, s.url, err)
	}
}

func (s *Server) startMini() {
	s.t.Helper()
	s.mini = miniredis.NewMiniRedis()
	if err := s.mini.StartAddr("127.0.0.1:0"); err != nil {
		s.t.Fatalf("redistest: start miniredis: %v", err)
	}
	s.addr = s.mini.Addr()
}

// startReal picks a free port and launches redis-server on it, trying a few
// ports in case another process takes the chosen one first.
func (s *Server) startReal() {
	s.t.Helper()
	var err error
	for range 3 {
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = s.launch(); err == nil {
			return
		}
	}
	s.t.Fatalf("redistest: start %s: %v", s.bin, err)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts redis-server on s.addr and waits until it answers PING.
func (s *Server) launch() error {
	cmd, exited, err := runRedis(s.bin, s.addr, s.dir)
	if err != nil {
		return err
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

func (s *Server) stopReal() {
	stopRedis(s.cmd, s.exited)
	s.cmd = nil
}

// runRedis starts the redis-server binary bin on addr, with persistence off,
// its files in dir and extra arguments appended, and waits until it answers
// PING. exited is closed when the process ends.
func runRedis(bin, addr, dir string, extra ...string) (cmd *exec.Cmd, exited chan struct{}, err error) {
	_, port, _ := net.SplitHostPort(addr)
	logFile := filepath.Join(dir, "redis-"+port+".log")
	args := append([]string{
		"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", logFile,
		"--daemonize", "no", "--protected-mode", "no"}, extra...)
	cmd = exec.Command(bin, args...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return cmd, exited, nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logFile)
			return nil, nil, fmt.Errorf("redis-server on %s exited: %s", addr, lastLines(log, 5))
		default:
		}
		if time.Now().After(deadline) {
			stopRedis(cmd, exited)
			return nil, nil, fmt.Errorf("redis-server on %s did not answer PING within %s: %w", addr, startTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopRedis ends a redis-server started by runRedis (SIGTERM, then SIGKILL
// after 5 s) and waits for it. A nil cmd is already stopped.
func stopRedis(cmd *exec.Cmd, exited chan struct{}) {
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func lastLines(b []byte, n int) string {
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == '\r') {
		end--
	}
	start := end
	for lines := 0; start > 0; start-- {
		if b[start-1] == '\n' {
			if lines++; lines == n {
				break
			}
		}
	}
	if start == end {
		return "(empty log)"
	}
	return string(b[start:end])
}

// ScriptMicros returns the µs the Redis behind rdb has spent running
// scripts (EVALSHA and EVAL) so far, from INFO commandstats: a benchmark
// reads it before and after to report the server's time per operation,
// apart from the network and the client, which a busier host inflates.
func ScriptMicros(tb testing.TB, rdb goredis.UniversalClient) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, field := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(field, "usec="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatal(err)
				}
				total += us
			}
		}
	}
	return total
}
