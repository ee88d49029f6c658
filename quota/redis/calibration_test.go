package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestEstimateRatioIsSharedAndDurable: what one replica's store learns of a
// provider's token count, every store on the same Redis applies at once, and
// a store built anew (a restarted worker) starts from it.
func TestEstimateRatioIsSharedAndDurable(t *testing.T) {
	rdb := redistest.Start(t)
	ctx := context.Background()
	ps := policies(t, quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Tokens, 1_000_000).WithBurst(time.Minute)}})
	learner, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	other, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)

	est := quota.Cost{Requests: 1, Tokens: 1000, InputTokens: 1000}
	for i := range 5 {
		ticket := "learn-" + strconv.Itoa(i)
		d, err := learner.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: est, Prompt: 1000})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome)
		require.NoError(t, learner.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: ticket, Counted: true, Prompt: 1000,
			Actual: quota.Cost{Requests: 1, Tokens: 1400, InputTokens: 1400}}))
	}

	restarted, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	for name, s := range map[string]*redis.Store{"another replica": other, "a restarted worker": restarted} {
		snap, err := s.Snapshot(ctx, gpt4o)
		require.NoError(t, err)
		require.InDelta(t, 1.4, snap.EstimateRatio, 1e-3, name)
		d, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "use-" + name, Cost: est, Prompt: 1000})
		require.NoError(t, err)
		require.InDelta(t, 1400, d.Charged.Tokens, 1, "%s charges the learned count", name)
	}
}
