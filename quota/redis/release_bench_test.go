package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/released"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// BenchmarkAdmitByRelease runs one admission, a Reserve then a Settle
// carrying the provider's headers, on the previous release's store
// (quota/internal/released) and on this one, on one Redis in one run, so
// that their server-µs/op (the time Redis spent in the scripts, per
// admission) compare on the same machine at the same moment. ping is a
// PING round trip on the same connection pool, the baseline.
//
// interleaved runs the two stores' admissions one after the other, the
// previous release's then this one's, each on a Redis of its own: the
// machine's noise falls on both alike, and each pays for its own garbage.
// It is the figure to compare; previous and current, run one after the
// other on one Redis, drift with the machine by more than they differ.
func BenchmarkAdmitByRelease(b *testing.B) {
	srv := redistest.StartServer(b)
	rdb := srv.Client()
	ctx := context.Background()
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{gpt4o: {Limits: []quota.Limit{
		quota.Per(quota.Requests, 1<<40, time.Millisecond), quota.Per(quota.Tokens, 1<<40, time.Millisecond),
	}}})
	if err != nil {
		b.Fatal(err)
	}
	previous, err := released.New(rdb, ps, released.Options{})
	if err != nil {
		b.Fatal(err)
	}
	current, err := redis.New(rdb, ps, redis.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cost := quota.Cost{Requests: 1, Tokens: 1200}
	observed := []quota.Observation{{Axis: quota.Requests, Limit: -1, Remaining: 1 << 39}, {Axis: quota.Tokens, Limit: -1, Remaining: 1 << 39}}
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, s := range []struct {
		name  string
		store quota.Store
	}{{"previous", previous}, {"current", current}} {
		b.Run(s.name, func(b *testing.B) {
			before := redistest.ScriptMicros(b, rdb)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ticket := s.name + strconv.Itoa(i) + "." + strconv.Itoa(b.N)
				d, err := s.store.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: cost})
				if err != nil || d.Outcome != quota.Granted {
					b.Fatalf("reserve %s: %+v %v", ticket, d, err)
				}
				if err := s.store.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: ticket, Actual: cost, Observed: observed}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((redistest.ScriptMicros(b, rdb)-before)/float64(b.N), "server-µs/op")
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		// Each release on a Redis of its own, so that neither pays for the
		// garbage the other's scripts leave (Lua's collector runs in
		// steps, during whichever script comes next).
		rdbs := []*goredis.Client{redistest.StartServer(b).Client(), redistest.StartServer(b).Client()}
		previous, err := released.New(rdbs[0], ps, released.Options{})
		if err != nil {
			b.Fatal(err)
		}
		current, err := redis.New(rdbs[1], ps, redis.Options{})
		if err != nil {
			b.Fatal(err)
		}
		stores := []quota.Store{previous, current}
		before := []float64{redistest.ScriptMicros(b, rdbs[0]), redistest.ScriptMicros(b, rdbs[1])}
		for i := 0; b.Loop(); i++ {
			for _, s := range stores {
				ticket := "interleaved" + strconv.Itoa(i) + "." + strconv.Itoa(b.N)
				if _, err := s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: cost}); err != nil {
					b.Fatal(err)
				}
				if err := s.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: ticket, Actual: cost, Observed: observed}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric((redistest.ScriptMicros(b, rdbs[0])-before[0])/float64(b.N), "previous-µs/op")
		b.ReportMetric((redistest.ScriptMicros(b, rdbs[1])-before[1])/float64(b.N), "current-µs/op")
	})
}
