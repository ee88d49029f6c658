package redis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// BenchmarkReserveInLine measures what a saturated account's line costs:
// a Reserve asked again by a ticket waiting in a line of n tickets of two
// tenants, which reads the tickets on the shorter side of its place to find
// the cost ahead of it: none at the front (where a ticket is when it
// matures), half the line in the middle, the worst case. server-µs/op is
// the time Redis spent in the script.
func BenchmarkReserveInLine(b *testing.B) {
	for _, c := range []struct {
		n     int
		place string
	}{{10, "front"}, {10, "middle"}, {100, "front"}, {100, "middle"}, {1000, "front"}, {1000, "middle"}} {
		n := c.n
		b.Run("queued="+strconv.Itoa(n)+"/"+c.place, func(b *testing.B) {
			rdb := redistest.Start(b)
			ctx := context.Background()
			account := quota.Key{Provider: "openai", Model: "gpt-4o"}
			ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{account: {
				Limits:  []quota.Limit{quota.PerMinute(quota.Requests, 1).WithBurst(time.Minute), quota.PerMinute(quota.Tokens, 1000).WithBurst(time.Minute)},
				MaxWait: 24 * time.Hour,
			}})
			if err != nil {
				b.Fatal(err)
			}
			clock := quotatest.NewClock(time.Date(2025, 1, 15, 18, 0, 0, 0, time.UTC))
			s, err := redis.New(rdb, ps, redis.Options{Clock: clock})
			if err != nil {
				b.Fatal(err)
			}
			calls := make([]quota.Reservation, n)
			for i := range calls {
				k := account
				k.Tenant = "tenant-" + strconv.Itoa(i%2)
				calls[i] = quota.Reservation{Key: k, Ticket: "t" + strconv.Itoa(i), Cost: quota.Cost{Requests: 1, Tokens: 10}}
				if _, err := s.Reserve(ctx, calls[i]); err != nil {
					b.Fatal(err)
				}
			}
			at := 1 // the ticket first in line; calls[0] was granted
			if c.place == "middle" {
				at = n / 2
			}
			before := redistest.ScriptMicros(b, rdb)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				d, err := s.Reserve(ctx, calls[at])
				if err != nil || d.Outcome != quota.Queued {
					b.Fatalf("%+v %v", d, err)
				}
			}
			b.StopTimer()
			b.ReportMetric((redistest.ScriptMicros(b, rdb)-before)/float64(b.N), "server-µs/op")
		})
	}
}
