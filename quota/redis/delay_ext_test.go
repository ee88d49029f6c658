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
		first := time.Now().Add(d.Start)
		require.Equal(t, quota.Granted, d.Outcome)
		require.LessOrEqual(t, d.Start, redis.DefaultStartDelay, "the gate is open: the call starts after the StartDelay")

		hold.d.Store(int64(late))
		d, err = s.Reserve(ctx, quota.Reservation{Key: k, Ticket: "second", Cost: one})
		hold.d.Store(0)
		require.NoError(t, err)
		require.NotEqual(t, quota.Refused, d.Outcome, "a grant paced by its Start, or a place that matures in its Wait")
		due := time.Now().Add(d.Start + d.Wait).Sub(first)
		if d.Outcome == quota.Queued {
			due += redis.DefaultStartDelay // the grant its Reserve at maturity gets starts then
		}
		require.InDelta(t, 100*time.Millisecond, due, float64(4*time.Millisecond),
			"reply held %s: the second call is due %s after the first", late, due)
	}
}

// replyHold is a client hook that holds each script's reply for d after it
// arrives, as a busy network or client would.
type replyHold struct {
	passHook
	d atomic.Int64
}

func (h *replyHold) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		time.Sleep(time.Duration(h.d.Load()))
		return err
	}
}

// TestStartDelay: a grant on a rate-limited key starts StartDelay after its
// decision (less its reply's lateness), one on a key with only a
// concurrency limit at once, and a negative StartDelay starts every call
// at once.
func TestStartDelay(t *testing.T) {
	mini := quota.Key{Provider: "openai", Model: "gpt-4o-mini"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		gpt4o: {Limits: []quota.Limit{quota.Per(quota.Requests, 600, time.Minute)}},
		mini:  {Limits: []quota.Limit{quota.Concurrent(4)}},
	})
	require.NoError(t, err)
	rdb := redistest.Start(t)
	ctx := context.Background()
	start := func(s *redis.Store, k quota.Key, ticket string) time.Duration {
		t.Helper()
		d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: quota.Cost{Requests: 1}})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome)
		return d.Start
	}
	s, err := redis.New(rdb, ps, redis.Options{StartDelay: 30 * time.Millisecond})
	require.NoError(t, err)
	require.InDelta(t, 30*time.Millisecond, start(s, gpt4o, "a"), float64(5*time.Millisecond))
	require.Zero(t, start(s, mini, "b"), "no start gate to keep in step with")

	s, err = redis.New(rdb, ps, redis.Options{StartDelay: -1, Prefix: "none"})
	require.NoError(t, err)
	require.Zero(t, start(s, gpt4o, "c"))
}
