package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

var gpt4o = quota.Key{Provider: "openai", Model: "gpt-4o"}

func policies(t *testing.T, p quota.Policy) quota.Policies {
	t.Helper()
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{gpt4o: p})
	require.NoError(t, err)
	return ps
}

func TestNewValidatesOptions(t *testing.T) {
	ps := policies(t, quota.Policy{})
	rdb := redistest.Start(t)
	tests := []struct {
		name  string
		rdb   redis.Client
		opts  redis.Options
		field string
	}{
		{name: "nil client", opts: redis.Options{}, field: "redis.client"},
		{name: "brace in prefix", rdb: rdb, opts: redis.Options{Prefix: "a{b"}, field: "redis.prefix"},
		{name: "space in prefix", rdb: rdb, opts: redis.Options{Prefix: "a b"}, field: "redis.prefix"},
		{name: "start delay over a second", rdb: rdb, opts: redis.Options{StartDelay: 2 * time.Second}, field: "redis.start_delay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redis.New(tt.rdb, ps, tt.opts)
			require.ErrorIs(t, err, quota.ErrInvalid)
			require.ErrorContains(t, err, tt.field)
		})
	}
	_, err := redis.New(rdb, ps, redis.Options{Prefix: "team-a:tollgate"})
	require.NoError(t, err)
}

// TestKeyLayout pins the Redis keys a key's state lives under: one hash tag
// per account (so Redis Cluster keeps an account and its tenants in one
// slot), a tenant's budget beside its account's, tickets in the account's
// namespace that expire on their own.
func TestKeyLayout(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	vip, solo := gpt4o, quota.Key{Provider: "openai", Model: "o3", Tenant: "solo"}
	vip.Tenant = "vip"
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		gpt4o: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute), quota.Concurrent(2)}},
		vip:   {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1).WithBurst(time.Minute), quota.Concurrent(1)}},
		solo:  {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1).WithBurst(time.Minute)}}, // o3 has no account-wide policy
	})
	require.NoError(t, err)
	s, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	for _, r := range []struct {
		key    quota.Key
		ticket string
		want   quota.Outcome
	}{
		{gpt4o, "wf/run/1", quota.Granted},
		{vip, "wf/run/2", quota.Granted},
		{vip, "wf/run/3", quota.Queued},
		{solo, "wf/run/4", quota.Granted},
	} {
		d, err := s.Reserve(ctx, quota.Reservation{Key: r.key, Ticket: r.ticket, Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		require.Equal(t, r.want, d.Outcome, r.ticket)
	}

	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{
		"tollgate:{openai/default/gpt-4o}",
		"tollgate:{openai/default/gpt-4o}:leases",
		"tollgate:{openai/default/gpt-4o}:queue",
		"tollgate:{openai/default/gpt-4o}:line",    // wf/run/3 waits for capacity, in fair-share order
		"tollgate:{openai/default/gpt-4o}:finish",  // its tenant's latest tag
		"tollgate:{openai/default/gpt-4o}:waiting", // and what its tenant has in line
		"tollgate:{openai/default/gpt-4o}:t:wf/run/1",
		"tollgate:{openai/default/gpt-4o}:t:wf/run/2", // a nested tenant's tickets are its account's
		"tollgate:{openai/default/gpt-4o}:t:wf/run/3",
		"tollgate:{openai/default/gpt-4o}/vip",
		"tollgate:{openai/default/gpt-4o}/vip/leases",
		"tollgate:{openai/default/gpt-4o}/vip/queue",
		"tollgate:{openai/default/o3}/solo", // a tenant on its own keeps its own tickets
		"tollgate:{openai/default/o3}/solo/t/wf/run/4",
	}, keys)
	ttl, err := rdb.PTTL(ctx, "tollgate:{openai/default/gpt-4o}:t:wf/run/1").Result()
	require.NoError(t, err)
	require.Greater(t, ttl, quota.DefaultLeaseTTL, "ticket records outlive their expiry: PEXPIRE only collects garbage")

	require.NoError(t, s.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "wf/run/1", Actual: quota.Cost{Requests: 1}}))
	n, err := rdb.Exists(ctx, "tollgate:{openai/default/gpt-4o}:t:wf/run/1").Result()
	require.NoError(t, err)
	require.Zero(t, n, "a settled ticket is forgotten")
}

// TestPrefixSeparatesStores: stores with different prefixes keep separate
// budgets on one server.
func TestPrefixSeparatesStores(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	ps := policies(t, quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1).WithBurst(time.Minute)}})
	clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	a, err := redis.New(rdb, ps, redis.Options{Prefix: "a", Clock: clock})
	require.NoError(t, err)
	b, err := redis.New(rdb, ps, redis.Options{Prefix: "b", Clock: clock})
	require.NoError(t, err)
	for _, s := range []*redis.Store{a, b} {
		d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome)
	}
}

// TestScriptCacheFlushed: after SCRIPT FLUSH (a restart, a failover) the
// script is sent again rather than failing with NOSCRIPT.
func TestScriptCacheFlushed(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	s, err := redis.New(rdb, policies(t, quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute)}}), redis.Options{})
	require.NoError(t, err)
	_, err = s.Snapshot(ctx, gpt4o)
	require.NoError(t, err)
	require.NoError(t, rdb.ScriptFlush(ctx).Err())
	_, err = s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1}})
	require.NoError(t, err)
}

// TestRedisTimeIsTheClock: with no Options.Clock the scripts read Redis TIME.
func TestRedisTimeIsTheClock(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	s, err := redis.New(rdb, policies(t, quota.Policy{Limits: []quota.Limit{
		quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute), quota.PerDay(quota.Tokens, 1000, nil), quota.Concurrent(1),
	}}), redis.Options{})
	require.NoError(t, err)
	redisNow, err := rdb.Time(ctx).Result()
	require.NoError(t, err)

	snap, err := s.Snapshot(ctx, gpt4o)
	require.NoError(t, err)
	require.WithinDuration(t, redisNow, snap.At, time.Second)
	y, m, d := redisNow.UTC().Date()
	require.Equal(t, time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), snap.Axes[1].ResetAt.UTC())

	dec, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1, Tokens: 10}})
	require.NoError(t, err)
	require.True(t, dec.Lease)
	require.WithinDuration(t, redisNow.Add(quota.DefaultLeaseTTL), dec.LeaseExpiry, time.Second)
}

// TestLevelsKeepFractions: Lua numbers are doubles, but Redis truncates
// them to integers on return; levels must come back whole.
func TestLevelsKeepFractions(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	s, err := redis.New(rdb, policies(t, quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 90).WithBurst(time.Minute)}}), redis.Options{Clock: clock})
	require.NoError(t, err)
	_, err = s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 90}})
	require.NoError(t, err)
	clock.Advance(time.Second)
	snap, err := s.Snapshot(ctx, gpt4o)
	require.NoError(t, err)
	require.InDelta(t, 1.5, snap.Axes[0].Available, 1e-9)
	d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "u", Cost: quota.Cost{Requests: 2}})
	require.NoError(t, err)
	require.Equal(t, quota.Queued, d.Outcome)
	require.InDelta(t, float64(time.Second/3), float64(d.Wait), float64(time.Microsecond))
}

// TestUnavailable: a server that cannot be reached is quota.ErrUnavailable,
// wrapping the cause, from every method.
func TestUnavailable(t *testing.T) {
	srv := redistest.StartServer(t)
	opts := srv.Options()
	opts.MaxRetries = -1
	opts.DialTimeout = 200 * time.Millisecond
	rdb := goredisClient(t, opts)
	s, err := redis.New(rdb, policies(t, quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute)}}), redis.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	srv.Stop()

	calls := map[string]func() error{
		"reserve": func() error {
			_, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1}})
			return err
		},
		"settle": func() error { return s.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "t", Actual: quota.Cost{}}) },
		"cancel": func() error { return s.Cancel(ctx, gpt4o, "t") },
		"pause":  func() error { return s.Pause(ctx, gpt4o, time.Minute, quota.PauseOverloaded) },
		"observe": func() error {
			return s.Observe(ctx, gpt4o, []quota.Observation{{Axis: quota.Requests, Limit: -1, Remaining: 1}})
		},
		"snapshot": func() error {
			_, err := s.Snapshot(ctx, gpt4o)
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.ErrorIs(t, err, quota.ErrUnavailable)
			require.ErrorContains(t, err, "connect", "the cause is kept")
			require.ErrorContains(t, err, gpt4o.String())
		})
	}

	srv.Restart()
	_, err = s.Snapshot(ctx, gpt4o)
	require.NoError(t, err, "the store recovers with the server")
}

// TestCancelledContextIsNotUnavailable: the caller giving up is not the
// store failing.
func TestCancelledContextIsNotUnavailable(t *testing.T) {
	s, err := redis.New(redistest.Start(t), policies(t, quota.Policy{}), redis.Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Snapshot(ctx, gpt4o)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, quota.ErrUnavailable)
}

// TestAdoptedLimitFollowsConfig: a limit adopted from a provider's report is
// shared by every store with the same configuration, but a store configured
// differently (another capacity, another headroom, or not adopting) uses its
// own configuration on that axis, as a memory store just started does.
func TestAdoptedLimitFollowsConfig(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
	store := func(p quota.Policy) *redis.Store {
		t.Helper()
		s, err := redis.New(rdb, policies(t, p), redis.Options{Clock: clock})
		require.NoError(t, err)
		return s
	}
	capacities := func(s quota.Store) map[quota.Axis]int64 {
		t.Helper()
		snap, err := s.Snapshot(ctx, gpt4o)
		require.NoError(t, err)
		caps := map[quota.Axis]int64{}
		for _, l := range snap.Axes {
			caps[l.Axis] = l.Capacity
		}
		return caps
	}
	limits := func(rpm, tpd int64) []quota.Limit {
		return []quota.Limit{quota.PerMinute(quota.Requests, rpm).WithBurst(time.Minute), quota.PerDay(quota.Tokens, tpd, nil)}
	}
	adopting := quota.Policy{Limits: limits(100, 10000), AdoptObservedLimits: true}

	a := store(adopting)
	require.NoError(t, a.Observe(ctx, gpt4o, []quota.Observation{
		{Axis: quota.Requests, Limit: 50, Remaining: -1},
		{Axis: quota.TokensPerDay, Limit: 5000, Remaining: -1},
	}))
	adopted := map[quota.Axis]int64{quota.Requests: 50, quota.TokensPerDay: 5000}
	require.Equal(t, adopted, capacities(a))
	require.Equal(t, adopted, capacities(store(adopting)), "the fleet shares what it adopted")

	for _, c := range []struct {
		name   string
		policy quota.Policy
		want   map[quota.Axis]int64
	}{
		{"not adopting", quota.Policy{Limits: limits(100, 10000)},
			map[quota.Axis]int64{quota.Requests: 100, quota.TokensPerDay: 10000}},
		{"another capacity", quota.Policy{Limits: limits(200, 20000), AdoptObservedLimits: true},
			map[quota.Axis]int64{quota.Requests: 200, quota.TokensPerDay: 20000}},
		{"another headroom", quota.Policy{Limits: limits(100, 10000), Headroom: 0.1, AdoptObservedLimits: true},
			map[quota.Axis]int64{quota.Requests: 90, quota.TokensPerDay: 9000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, capacities(store(c.policy)))
			m, err := memory.New(policies(t, c.policy), memory.Options{Clock: clock})
			require.NoError(t, err)
			require.Equal(t, c.want, capacities(m), "a fresh memory store agrees")
		})
	}

	// A change to one axis leaves the other's adoption standing.
	require.Equal(t, map[quota.Axis]int64{quota.Requests: 50, quota.TokensPerDay: 20000},
		capacities(store(quota.Policy{Limits: limits(100, 20000), AdoptObservedLimits: true})))

	// A store that adopts under the new configuration replaces the
	// adoption, which the old configuration then ignores too.
	b := store(quota.Policy{Limits: limits(200, 20000), AdoptObservedLimits: true})
	require.NoError(t, b.Observe(ctx, gpt4o, []quota.Observation{{Axis: quota.Requests, Limit: 150, Remaining: -1}}))
	require.Equal(t, map[quota.Axis]int64{quota.Requests: 150, quota.TokensPerDay: 20000}, capacities(b))
	require.Equal(t, map[quota.Axis]int64{quota.Requests: 100, quota.TokensPerDay: 5000}, capacities(a))
}
