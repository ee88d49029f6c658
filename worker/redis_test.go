package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		cluster   []string // the cluster's seed nodes, nil for one server
		addr      string   // one server's address
		db        int
	}{
		{name: "one server", url: "redis://redis:6379/2", addr: "redis:6379", db: 2},
		{name: "one server over TLS", url: "rediss://user:pw@redis:6380", addr: "redis:6380"},
		{name: "cluster", url: "redis+cluster://r1:6379,r2:6379,r3:6379", cluster: []string{"r1:6379", "r2:6379", "r3:6379"}},
		{name: "cluster of one seed, database 0", url: "redis+cluster://r1:7000/0", cluster: []string{"r1:7000"}},
		{name: "cluster over TLS with options", url: "rediss+cluster://u:pw@r1:6379,r2:6379?dial_timeout=2s", cluster: []string{"r1:6379", "r2:6379"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, err := parseRedisURL(tc.url)
			require.NoError(t, err)
			if tc.cluster == nil {
				require.Nil(t, target.cluster)
				require.Equal(t, tc.addr, target.single.Addr)
				require.Equal(t, tc.db, target.single.DB)
				return
			}
			require.Nil(t, target.single)
			require.Equal(t, tc.cluster, target.cluster.Addrs)
		})
	}
	target, err := parseRedisURL("rediss+cluster://u:pw@r1:6379,r2:6379?dial_timeout=2s")
	require.NoError(t, err)
	require.NotNil(t, target.cluster.TLSConfig, "rediss+cluster is TLS")
	require.Equal(t, "pw", target.cluster.Password)
	require.Equal(t, "2s", target.cluster.DialTimeout.String())

	for _, tc := range []struct{ name, url, problem, fix string }{
		{"cluster with a database", "redis+cluster://r1:6379,r2:6379/3", "has only database 0", "redis+cluster://"},
		{"cluster node without a port", "redis+cluster://r1:6379,r2", `"r2", which is not host:port`, "redis+cluster://"},
		{"cluster with an unknown option", "redis+cluster://r1:6379?dial_timout=1s", "unexpected option: dial_timout", "redis+cluster://"},
		{"cluster password stays secret", "redis+cluster://u:hunter2@r1:6379/4", "has only database 0", "redis+cluster://"},
		{"another scheme", "http://r:6379", "is not a Redis URL", "redis+cluster://host:port,host:port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRedisURL(tc.url)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, "REDIS_URL", ce.Env)
			require.ErrorContains(t, err, tc.problem)
			require.ErrorContains(t, err, tc.fix)
			require.NotContains(t, err.Error(), "hunter2")
			require.Error(t, Config{RedisURL: tc.url}.Validate(), "Validate checks it too")
		})
	}
}

// A password holding '/' or '?' unencoded makes a URL net/url splits at
// the wrong place: whatever the error says, no part of the password is in
// it, nor in any error it wraps.
func TestRedisURLErrorsHideThePassword(t *testing.T) {
	const user = "tollgate"
	for _, pw := range []string{"alpha/bravo", "alpha?bravo", "6379/alpha?bravo", "alpha#bravo", "alpha:bravo/x"} {
		for _, scheme := range []string{"redis", "rediss", "redis+cluster", "rediss+cluster"} {
			hosts := "r1:6379"
			if strings.HasSuffix(scheme, "+cluster") {
				hosts = "r1:6379,r2:6379"
			}
			raw := scheme + "://" + user + ":" + pw + "@" + hosts + "/0"
			t.Run(raw, func(t *testing.T) {
				_, err := parseRedisURL(raw)
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, "REDIS_URL", ce.Env)
				require.ErrorContains(t, err, "percent-encode")
				for e := error(err); e != nil; e = errors.Unwrap(e) {
					for _, part := range []string{"alpha", "bravo"} {
						require.NotContains(t, e.Error(), part, "%T", e)
					}
				}
				_, _, err = Config{RedisURL: raw}.RedisClient()
				require.Error(t, err)
				require.NotContains(t, err.Error(), "alpha")
			})
		}
	}
	// Encoded, the same passwords are read whole.
	for _, raw := range []string{"redis://u:alpha%2Fbravo%3F@r1:6379/0", "redis+cluster://u:alpha%2Fbravo%3F@r1:6379,r2:6379"} {
		target, err := parseRedisURL(raw)
		require.NoError(t, err, raw)
		if target.cluster != nil {
			require.Equal(t, "alpha/bravo?", target.cluster.Password)
		} else {
			require.Equal(t, "alpha/bravo?", target.single.Password)
		}
	}
	// A URL that does not parse for another reason hides its password in
	// every error it wraps too.
	for _, raw := range []string{"redis://u:hunter2@r1:port/0", "redis+cluster://u:hunter2@r1:6379,r2:6379/%zz"} {
		_, err := parseRedisURL(raw)
		require.Error(t, err, raw)
		for e := err; e != nil; e = errors.Unwrap(e) {
			require.NotContains(t, e.Error(), "hunter2", "%s: %T", raw, e)
		}
	}
}

// A worker given a redis+cluster:// REDIS_URL keeps its budgets on the
// cluster, where another client of the cluster sees them.
func TestStoreOnARedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	key := quota.Key{Provider: "openai", Model: "gpt-4o-mini"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 60)}}})
	require.NoError(t, err)
	var logs syncbuf.Buffer
	store, closeStore, err := openStore(Config{RedisURL: cluster.URL()}, ps, noop.NewMeterProvider().Meter(""), slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	defer closeStore()
	require.Contains(t, logs.String(), "cluster="+cluster.Addrs()[0])

	ctx := context.Background()
	d, err := store.Reserve(ctx, quota.Reservation{Key: key, Ticket: "cluster-test", Cost: quota.Cost{Requests: 20}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome)

	other, err := redis.New(cluster.Client(), ps, redis.Options{})
	require.NoError(t, err)
	snap, err := other.Snapshot(ctx, key)
	require.NoError(t, err)
	require.Equal(t, quota.Requests, snap.Axes[0].Axis)
	require.Less(t, snap.Axes[0].Available, float64(snap.Axes[0].Capacity-19), "the other client sees the spent budget")
}

// openLogs opens the worker's store on the Redis at url and returns what it
// logged.
func openLogs(t *testing.T, url string) string {
	t.Helper()
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{{Provider: "openai", Model: "gpt-4o-mini"}: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 60)}}})
	require.NoError(t, err)
	_, closeStore, err := openStore(Config{RedisURL: url}, ps, noop.NewMeterProvider().Meter(""), logger)
	require.NoError(t, err)
	require.NoError(t, closeStore())
	return logs.String()
}

// The worker warns at start when Redis may evict keys without a TTL, and
// says nothing for policies that cannot.
func TestWarnsWhenRedisMayEvictBudgets(t *testing.T) {
	srv := redistest.StartProcess(t, "CONFIG SET maxmemory-policy") // miniredis has no CONFIG
	admin := srv.Client()
	ctx := context.Background()
	for _, tc := range []struct {
		policy string
		warns  bool
	}{
		{"noeviction", false}, {"volatile-lru", false}, {"volatile-ttl", false},
		{"allkeys-lru", true}, {"allkeys-lfu", true}, {"allkeys-random", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", tc.policy).Err())
			logs := openLogs(t, srv.URL())
			if tc.warns {
				require.Contains(t, logs, "level=WARN")
				require.Contains(t, logs, "maxmemory-policy is "+tc.policy)
				require.Contains(t, logs, "noeviction")
			} else {
				require.NotContains(t, logs, "level=WARN", logs)
			}
		})
	}
}

// The worker starts quietly when CONFIG is not available.
func TestStartsWhenRedisHasNoCONFIG(t *testing.T) {
	mini := miniredis.RunT(t) // answers CONFIG with "unknown command", as a server with CONFIG renamed away does
	logs := openLogs(t, "redis://"+mini.Addr()+"/0")
	require.NotContains(t, logs, "level=WARN", logs)
	require.Contains(t, logs, "could not read Redis maxmemory-policy")
}
