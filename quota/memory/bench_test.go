package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// BenchmarkReserve measures one admission on a key metered on four axes: a
// Reserve that is granted and the Settle that refunds part of the estimate.
func BenchmarkReserve(b *testing.B) {
	for _, c := range []struct {
		name   string
		limits []quota.Limit
	}{
		{"buckets", []quota.Limit{
			quota.PerMinute(quota.Requests, 1<<40).WithBurst(time.Minute), quota.PerMinute(quota.Tokens, 1<<49).WithBurst(time.Minute),
			quota.PerMinute(quota.InputTokens, 1<<49).WithBurst(time.Minute), quota.PerMinute(quota.OutputTokens, 1<<49).WithBurst(time.Minute),
		}},
		{"mixed", []quota.Limit{
			quota.PerMinute(quota.Requests, 1<<40).WithBurst(time.Minute), quota.PerMinute(quota.Tokens, 1<<49).WithBurst(time.Minute),
			quota.PerDay(quota.Tokens, 1<<49, time.UTC), quota.Concurrent(1 << 20),
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			k := quota.Key{Provider: "openai", Account: "org-1", Model: "gpt-4o"}
			ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{k: {Limits: c.limits}})
			if err != nil {
				b.Fatal(err)
			}
			s := newStore(b, ps, quota.SystemClock{})
			tickets := make([]string, 4096)
			for i := range tickets {
				tickets[i] = "default/agent-" + strconv.Itoa(i) + "/run/activity-7"
			}
			ctx := context.Background()
			estimate := quota.Cost{Requests: 1, Tokens: 1200, InputTokens: 200, OutputTokens: 1000}
			actual := quota.Cost{Requests: 1, Tokens: 700, InputTokens: 200, OutputTokens: 500}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				ticket := tickets[i%len(tickets)]
				d, err := s.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: estimate})
				if err != nil || d.Outcome != quota.Granted {
					b.Fatalf("%+v %v", d, err)
				}
				if err := s.Settle(ctx, quota.Settlement{Key: k, Ticket: ticket, Actual: actual}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
