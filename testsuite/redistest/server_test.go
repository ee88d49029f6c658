package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestStartAnswersAndIsEmpty(t *testing.T) {
	rdb := Start(t)
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err())
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a fresh server holds no keys")
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
}

func TestServersAreIndependent(t *testing.T) {
	if os.Getenv(EnvURL) != "" {
		t.Skipf("redistest: every test shares the %s database", EnvURL)
	}
	a, b := StartServer(t), StartServer(t)
	require.NotEqual(t, a.Addr(), b.Addr())
	ctx := context.Background()
	require.NoError(t, a.Client().Set(ctx, "k", "a", 0).Err())
	require.ErrorIs(t, b.Client().Get(ctx, "k").Err(), goredis.Nil)
}

func TestStopAndRestart(t *testing.T) {
	s := StartServer(t)
	ctx := context.Background()
	rdb := s.Client()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	addr := s.Addr()

	s.Stop()
	require.Error(t, rdb.Ping(ctx).Err(), "a stopped server does not answer")
	s.Stop() // stopping twice is harmless

	s.Restart()
	require.Equal(t, addr, s.Addr(), "restart keeps the address")
	require.NoError(t, rdb.Ping(ctx).Err(), "the same client reconnects")
	require.ErrorIs(t, rdb.Get(ctx, "k").Err(), goredis.Nil, "a restarted server comes back empty")

	s.Restart() // restarting a running server works too
	require.NoError(t, rdb.Ping(ctx).Err())
}

func TestURLAndClientAgree(t *testing.T) {
	s := StartServer(t)
	opts := s.Options()
	require.Equal(t, s.Addr(), opts.Addr)
	require.NoError(t, s.Client().Ping(context.Background()).Err())
}

func TestChooseBackend(t *testing.T) {
	lookPath := func(file string) (string, error) {
		if file == "redis-server" || file == "/opt/redis/bin/redis-server" {
			return "/usr/bin/" + filepath.Base(file), nil
		}
		return "", errors.New("not found")
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    Backend
		wantBin string
		wantErr string
	}{
		{name: "redis-server on PATH", want: Real, wantBin: "/usr/bin/redis-server"},
		{name: "a binary of its own", env: map[string]string{EnvServer: "/opt/redis/bin/redis-server"}, want: Real, wantBin: "/usr/bin/redis-server"},
		{name: "the test URL wins over PATH", env: map[string]string{EnvURL: "redis://h:1/2"}, want: External},
		{name: "the test URL without redis-server", env: map[string]string{EnvURL: "redis://h:1/2", EnvServer: "nope", EnvRequire: "1"}, want: External},
		{name: "the worker's REDIS_URL is not read", env: map[string]string{"REDIS_URL": "redis://fleet:6379/0"}, want: Real, wantBin: "/usr/bin/redis-server"},
		{name: "missing falls back to miniredis", env: map[string]string{EnvServer: "nope"}, want: Mini},
		{name: "missing but required", env: map[string]string{EnvServer: "nope", EnvRequire: "1"}, wantErr: "install it"},
		{name: "require only counts when 1", env: map[string]string{EnvServer: "nope", EnvRequire: "yes"}, want: Mini},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bin, err := chooseBackend(func(k string) string { return tt.env[k] }, lookPath)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, EnvRequire)
				require.ErrorContains(t, err, "apt-get install redis-server")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantBin, bin)
		})
	}
}

// tbRecorder stands in for a test's testing.TB to see what a helper does
// to it: Skip and Fatal record their message and end the helper (as the
// real ones end the test) by panicking with errEnded.
type tbRecorder struct {
	testing.TB
	skipped, failed string
}

var errEnded = errors.New("helper ended the test")

func (r *tbRecorder) Helper()                   {}
func (r *tbRecorder) Skip(args ...any)          { r.skipped = fmt.Sprint(args...); panic(errEnded) }
func (r *tbRecorder) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...); panic(errEnded) }
func (r *tbRecorder) Fatal(args ...any)         { r.failed = fmt.Sprint(args...); panic(errEnded) }
func (r *tbRecorder) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...); panic(errEnded) }

// run calls f with r as its test, recovering the end Skip or Fatal causes.
func (r *tbRecorder) run(f func(tb testing.TB)) {
	defer func() {
		if p := recover(); p != nil && p != errEnded {
			panic(p)
		}
	}()
	f(r)
}

// A test that needs the real process, on a machine without it, is skipped
// with one line naming the install command, or fails when Redis is
// required.
func TestNeedBinary(t *testing.T) {
	missing := func(string) (string, error) { return "", errors.New("not found") }
	t.Run("found", func(t *testing.T) {
		found := func(file string) (string, error) { return "/usr/bin/" + file, nil }
		r := &tbRecorder{TB: t}
		var bin string
		r.run(func(tb testing.TB) { bin = needBinary(tb, func(string) string { return "" }, found, "CONFIG SET") })
		require.Equal(t, "/usr/bin/redis-server", bin)
		require.Empty(t, r.skipped)
		require.Empty(t, r.failed)
	})
	t.Run("missing", func(t *testing.T) {
		env := map[string]string{EnvServer: "nope"}
		r := &tbRecorder{TB: t}
		r.run(func(tb testing.TB) { needBinary(tb, func(k string) string { return env[k] }, missing, "CONFIG SET") })
		require.Empty(t, r.failed)
		require.Equal(t, `redistest: CONFIG SET needs a real redis-server, and nope is not found (apt-get install redis-server, or brew install redis)`, r.skipped)
		require.NotContains(t, r.skipped, "\n", "one line")
	})
	t.Run("missing but required", func(t *testing.T) {
		env := map[string]string{EnvServer: "nope", EnvRequire: "1"}
		r := &tbRecorder{TB: t}
		r.run(func(tb testing.TB) { needBinary(tb, func(k string) string { return env[k] }, missing, "CONFIG SET") })
		require.Empty(t, r.skipped)
		require.Contains(t, r.failed, "apt-get install redis-server")
		require.Contains(t, r.failed, EnvRequire+"=1")
	})
}

// A test database named by TOLLGATE_TEST_REDIS_URL that holds keys is not
// the tests': StartServer fails without touching it. An empty one is used
// and emptied again when the test ends.
func TestExternalDatabaseMustStartEmpty(t *testing.T) {
	other := miniredis.RunT(t)
	url := "redis://" + other.Addr() + "/0"
	t.Setenv(EnvURL, url)
	ctx := context.Background()

	t.Run("empty", func(t *testing.T) {
		s := StartServer(t)
		require.Equal(t, External, s.Backend())
		require.Equal(t, url, s.URL())
		require.NoError(t, s.Client().Set(ctx, "written by the test", "v", 0).Err())
	})
	require.Empty(t, other.DB(0).Keys(), "the test emptied what it wrote")

	require.NoError(t, other.Set("someone else's", "v"))
	r := &tbRecorder{TB: t}
	r.run(func(tb testing.TB) { StartServer(tb) })
	require.Contains(t, r.failed, "holds 1 keys this test did not write")
	v, err := other.Get("someone else's")
	require.NoError(t, err)
	require.Equal(t, "v", v, "the key survives")
}

// A shell set up for a fleet has REDIS_URL set: the helpers never use, let
// alone flush, that database. The fleet's Redis here is a server of this
// test's own holding a budget key; the helper's servers, stopped,
// restarted and written to, are elsewhere, and the key survives them.
func TestFleetRedisURLIsUntouched(t *testing.T) {
	fleet := StartServer(t)
	if fleet.Backend() == External {
		t.Skipf("redistest: %s is set; this test starts the servers it compares", EnvURL)
	}
	ctx := context.Background()
	fleetDB := fleet.Client()
	require.NoError(t, fleetDB.Set(ctx, "{openai/acct/gpt-4o}:s", "the fleet's budget", 0).Err())
	t.Setenv("REDIS_URL", fleet.URL())

	t.Run("helpers", func(t *testing.T) {
		s := StartServer(t)
		require.NotEqual(t, fleet.Addr(), s.Addr())
		rdb := s.Client()
		n, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the helper's server is not the fleet's")
		require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
		s.Restart()
		s.Stop()
		require.NoError(t, Start(t).FlushAll(ctx).Err(), "a test may flush a server it started")
	})

	v, err := fleetDB.Get(ctx, "{openai/acct/gpt-4o}:s").Result()
	require.NoError(t, err)
	require.Equal(t, "the fleet's budget", v)
	n, err := fleetDB.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "nothing was written to the fleet's database")
}

func TestFindCLI(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "redis-cli"), nil, 0o755))
	onPath := func(file string) (string, error) { return "/usr/bin/" + file, nil }
	got, err := findCLI(filepath.Join(dir, "redis-server"), onPath)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "redis-cli"), got, "beside the server binary first")
	got, err = findCLI("/usr/local/bin/redis-server", onPath)
	require.NoError(t, err)
	require.Equal(t, "/usr/bin/redis-cli", got, "else on PATH")
}

func TestMiniBackendStopAndRestart(t *testing.T) {
	s := StartMini(t)
	require.Equal(t, Mini, s.Backend())
	ctx := context.Background()
	rdb := s.Client()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	s.Stop()
	require.Error(t, rdb.Ping(ctx).Err())
	s.Restart()
	require.NoError(t, rdb.Ping(ctx).Err())
	require.ErrorIs(t, rdb.Get(ctx, "k").Err(), goredis.Nil, "a restarted server comes back empty")
}

func TestLastLines(t *testing.T) {
	require.Equal(t, "b\nc", lastLines([]byte("a\nb\nc\n"), 2))
	require.Equal(t, "a\nb\nc", lastLines([]byte("a\nb\nc"), 5))
	require.Equal(t, "(empty log)", lastLines(nil, 5))
}
