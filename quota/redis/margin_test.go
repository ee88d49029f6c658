package redis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/released"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/quota/storekit"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestMarginIsSharedAndKept: a 429 one replica learns from cuts the burst
// every replica starts calls at, and a store built afresh on the same Redis
// (a restarted worker) starts from what was learned, not from scratch.
func TestMarginIsSharedAndKept(t *testing.T) {
	srv := redistest.StartServer(t)
	k := quota.Key{Provider: "openai", Model: "margin-" + t.Name()}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{k: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 600)}}})
	require.NoError(t, err)
	stores := storesOn(t, srv, ps, 2)
	ctx := context.Background()

	require.NoError(t, stores[0].Pause(ctx, k, time.Millisecond, quota.PauseRateLimited))
	cut := storekit.Cut(storekit.NoMargin)
	snap, err := stores[1].Snapshot(ctx, k)
	require.NoError(t, err)
	require.Equal(t, cut, snap.Margin, "the other replica sees the lesson")
	require.InDelta(t, 10*cut.Burst, snap.Axes[0].Burst, 1e-9)
	time.Sleep(5 * time.Millisecond) // the pause ends

	// 600 a minute: a burst of 10, cut to 5 at once for both replicas.
	started := 0
	for i := range 10 {
		d, err := stores[i%2].Reserve(ctx, quota.Reservation{Key: k, Ticket: fmt.Sprintf("t%d", i), Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		if d.Outcome == quota.Granted && d.Start <= d.Delay {
			started++
		}
	}
	require.Equal(t, 5, started, "calls going at once across both replicas")

	restarted, err := redis.New(srv.Client(), ps, redis.Options{})
	require.NoError(t, err)
	snap, err = restarted.Snapshot(ctx, k)
	require.NoError(t, err)
	require.Equal(t, cut, snap.Margin, "a restarted worker keeps what the fleet learned")

	// What one replica's counted call earns back, the restarted one sees.
	require.NoError(t, stores[0].Settle(ctx, quota.Settlement{Key: k, Ticket: "t0", Actual: quota.Cost{Requests: 1}, Counted: true}))
	snap, err = restarted.Snapshot(ctx, k)
	require.NoError(t, err)
	_, p, _ := ps.Lookup(k)
	require.Equal(t, storekit.Gain(cut, storekit.MaxBurst(p)), snap.Margin)
	require.Greater(t, snap.Margin.Burst, cut.Burst)
}

// TestMarginAcrossReleases: in a fleet upgrading from the release before
// per-axis margins, a lesson the old release learned (one margin for the
// key) is every axis's to this one, and a lesson this one learns on one
// axis reaches the old release as the key's most cautious margin, which
// paces its calls on every axis no faster than this release's slowest
// (it keeps no burst refused).
func TestMarginAcrossReleases(t *testing.T) {
	srv := redistest.StartServer(t)
	k := quota.Key{Provider: "openai", Model: "margin-" + t.Name()}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{k: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 600), quota.PerMinute(quota.Tokens, 60000)}}})
	require.NoError(t, err)
	old, err := released.New(srv.Client(), ps, released.Options{})
	require.NoError(t, err)
	cur := storesOn(t, srv, ps, 1)[0]
	ctx := context.Background()

	require.NoError(t, old.Pause(ctx, k, time.Millisecond, quota.PauseRateLimited))
	learned, err := old.Snapshot(ctx, k)
	require.NoError(t, err)
	cut := learned.Margin
	require.Less(t, cut.Burst, 1.0)
	snap, err := cur.Snapshot(ctx, k)
	require.NoError(t, err)
	for _, a := range snap.Axes {
		require.Equal(t, cut, a.Margin, "%s: the old release's lesson is every axis's", a.Axis)
	}
	time.Sleep(5 * time.Millisecond) // the pause ends

	require.NoError(t, cur.Pause(ctx, k, time.Millisecond, quota.RateLimitedOn(quota.Requests)))
	snap, err = cur.Snapshot(ctx, k)
	require.NoError(t, err)
	twice := storekit.Cut(cut)
	require.Equal(t, twice, snap.Axes[0].Margin, "requests: cut again")
	require.Equal(t, cut, snap.Axes[1].Margin, "tokens: as the old release left it")
	seen, err := old.Snapshot(ctx, k)
	require.NoError(t, err)
	require.Equal(t, twice.Burst, seen.Margin.Burst, "the old release reads the most cautious")
	require.Equal(t, twice.Rate, seen.Margin.Rate)
}
