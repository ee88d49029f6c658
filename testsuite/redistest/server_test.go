package redistest

import (
	"context"
	"errors"
	"os"
	"testing"

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
		t.Skip("redistest: every test shares the REDIS_URL server")
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
	found := func(string) (string, error) { return "/usr/bin/redis-server", nil }
	missing := func(string) (string, error) { return "", errors.New("not found") }
	tests := []struct {
		name     string
		env      map[string]string
		lookPath func(string) (string, error)
		want     Backend
		wantErr  string
	}{
		{name: "redis-server on PATH", lookPath: found, want: Real},
		{name: "REDIS_URL wins over PATH", env: map[string]string{EnvURL: "redis://h:1/2"}, lookPath: found, want: External},
		{name: "REDIS_URL without redis-server", env: map[string]string{EnvURL: "redis://h:1/2", EnvRequire: "1"}, lookPath: missing, want: External},
		{name: "missing falls back to miniredis", lookPath: missing, want: Mini},
		{name: "missing but required", env: map[string]string{EnvRequire: "1"}, lookPath: missing, wantErr: "install it"},
		{name: "require only counts when 1", env: map[string]string{EnvRequire: "yes"}, lookPath: missing, want: Mini},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseBackend(func(k string) string { return tt.env[k] }, tt.lookPath)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, EnvRequire)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestMiniBackendStopAndRestart(t *testing.T) {
	s := &Server{t: t, backend: Mini}
	s.startMini()
	t.Cleanup(s.shutdown)
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
