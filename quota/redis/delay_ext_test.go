package redis_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// TestStartCountsFromTheDecision: a grant's Start (or a place's Wait) is
// how long the call waits from the moment Redis decided it, however long
// the reply took to arrive. Ten requests a second, each starting only once the one before
// is earned back: the second call is due 100 ms after the first, whether
// its reply came at once or 15 ms late; without the correction it would
// be due 115 ms after.
func TestStartCountsFromTheDecision(t *testing.T) {
	p := quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 10, time.Second)}}
	mini := quota.Key{Provider: "openai", Model: "gpt-4o-mini"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{gpt4o: p, mini: p})
	require.NoError(t, err)
	rdb := redistest.StartServer(t).Client()
	hold := &replyHold{}
	rdb.AddHook(hold)
	s, err := redis.New(rdb, ps, redis.Options{})
	keys := map[time.Duration]quota.Key{0: gpt4o, 15 * time.Millisecond: mini}
	require.NoError(t, err)
	ctx := context.Background()
	one := quota.Cost{Requests: 1}
	for _, late := range []time.Duration{0, 15 * time.Millisecond} {
		k := keys[late]
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: "first", Cost: one})
		require.NoError(t, err)
		first := time.Now()
		require.Equal(t, quota.Granted, d.Outcome)
		require.Zero(t, d.Start)

		hold.d.Store(int64(late))
		d, err = s.Reserve(ctx, quota.Reservation{Key: k, Ticket: "second", Cost: one})
		hold.d.Store(0)
		require.NoError(t, err)
		require.NotEqual(t, quota.Refused, d.Outcome, "a grant paced by its Start, or a place that matures in its Wait")
		due := time.Since(first) + d.Start + d.Wait
		require.InDelta(t, 100*time.Millisecond, due, float64(4*time.Millisecond),
			"reply held %s: the second call is due %s after the first", late, due)
	}
}

// replyHold is a client hook that holds each script's reply for d after it
// arrives, as a busy network or client would.
type replyHold struct{ d atomic.Int64 }

func (h *replyHold) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *replyHold) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}
func (h *replyHold) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		time.Sleep(time.Duration(h.d.Load()))
		return err
	}
}
