// Package bench holds benchmarks a user can rerun: what admission costs per
// call, against Redis and in memory.
package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

var key = quota.Key{Provider: "openai", Model: "gpt-4o"}

// policies returns a policy on the first n bucket axes, so large that no
// benchmark call is ever queued or refused.
func policies(b *testing.B, n int) quota.Policies {
	b.Helper()
	var limits []quota.Limit
	for _, a := range []quota.Axis{quota.Requests, quota.Tokens, quota.InputTokens, quota.OutputTokens}[:n] {
		limits = append(limits, quota.Per(a, 1<<40, time.Millisecond))
	}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: {Limits: limits}})
	if err != nil {
		b.Fatal(err)
	}
	return ps
}

var cost = quota.Cost{Requests: 1, Tokens: 1200, InputTokens: 1000, OutputTokens: 200}

// observed is what a provider reports with a call (OpenAI's request and
// token headers): high enough never to lower a benchmark's levels.
var observed = []quota.Observation{
	{Axis: quota.Requests, Limit: -1, Remaining: 1 << 39},
	{Axis: quota.Tokens, Limit: -1, Remaining: 1 << 39},
}

// work is how much of a governed call's store work a benchmark does.
type work int

const (
	reserveOnly  work = iota // Reserve
	settleBare               // Reserve, then Settle with nothing observed
	settleFolded             // Reserve, then Settle carrying the observations
	settleApart              // Reserve, Settle, then Observe: a round trip more
	calibrated               // settleFolded with a prompt to calibrate and a counted usage to learn from
)

// counted is what the provider counts of cost in calibrated benchmarks: a
// tokenizer 30 % denser than the estimate, so the learned ratio is not 1.
var counted = quota.Cost{Requests: 1, Tokens: 1500, InputTokens: 1300, OutputTokens: 200}

// admit runs w for a fresh ticket per iteration.
func admit(b *testing.B, s quota.Store, w work) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ticket := "t" + strconv.Itoa(i)
		r := quota.Reservation{Key: key, Ticket: ticket, Cost: cost}
		if w == calibrated {
			r.Prompt = cost.InputTokens
		}
		d, err := s.Reserve(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		if d.Outcome != quota.Granted {
			b.Fatalf("reserve %s: %+v", ticket, d)
		}
		switch w {
		case settleBare:
			err = s.Settle(ctx, quota.Settlement{Key: key, Ticket: ticket, Actual: cost})
		case settleFolded:
			err = s.Settle(ctx, quota.Settlement{Key: key, Ticket: ticket, Actual: cost, Observed: observed})
		case calibrated:
			err = s.Settle(ctx, quota.Settlement{Key: key, Ticket: ticket, Actual: counted, Observed: observed,
				Counted: true, Prompt: cost.InputTokens})
		case settleApart:
			if err = s.Settle(ctx, quota.Settlement{Key: key, Ticket: ticket, Actual: cost}); err == nil {
				err = s.Observe(ctx, key, observed)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedisPing is the baseline: one bare round trip to the same
// server the Redis benchmarks use.
func BenchmarkRedisPing(b *testing.B) {
	rdb := redistest.Start(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRedisReserve: one Reserve of a fresh ticket against a real
// redis-server (one script run, one round trip): the admission decision
// before every governed call, to compare with BenchmarkRedisPing.
func BenchmarkRedisReserve(b *testing.B) { redisBench(b, reserveOnly) }

// BenchmarkRedisAdmit: Reserve + Settle of a fresh ticket, the Settle
// carrying the provider's reported limits: all the store work of one
// governed call, two round trips.
func BenchmarkRedisAdmit(b *testing.B) { redisBench(b, settleFolded) }

// BenchmarkRedisAdmitCalibrated is BenchmarkRedisAdmit with the estimate
// calibrated: Reserve charges the prompt at the learned ratio and Settle
// learns from the counted usage, in the same two round trips.
func BenchmarkRedisAdmitCalibrated(b *testing.B) { redisBench(b, calibrated) }

// BenchmarkRedisAdmitObserveApart is BenchmarkRedisAdmit with the reported
// limits sent by a separate Observe, for comparison: three round trips.
func BenchmarkRedisAdmitObserveApart(b *testing.B) { redisBench(b, settleApart) }

func redisBench(b *testing.B, w work) {
	for _, axes := range []int{1, 4} {
		b.Run("axes="+strconv.Itoa(axes), func(b *testing.B) {
			rdb := redistest.Start(b)
			s, err := redis.New(rdb, policies(b, axes), redis.Options{})
			if err != nil {
				b.Fatal(err)
			}
			before := redistest.ScriptMicros(b, rdb)
			admit(b, s, w)
			b.StopTimer()
			// Time Redis spent running the scripts, apart from the network
			// and the client: what a busier host cannot inflate.
			b.ReportMetric((redistest.ScriptMicros(b, rdb)-before)/float64(b.N), "server-µs/op")
		})
	}
}

// BenchmarkMemoryReserve: Reserve + Settle of a fresh ticket in memory (the
// Settle keeps the store's tickets bounded, as calls do).
func BenchmarkMemoryReserve(b *testing.B) { memoryBench(b, settleBare) }

// BenchmarkMemoryAdmit is BenchmarkMemoryReserve with the Settle carrying
// the provider's reported limits, which lower the levels.
func BenchmarkMemoryAdmit(b *testing.B) { memoryBench(b, settleFolded) }

// BenchmarkMemoryAdmitCalibrated is BenchmarkMemoryAdmit with the estimate
// calibrated and learned from, as BenchmarkRedisAdmitCalibrated.
func BenchmarkMemoryAdmitCalibrated(b *testing.B) { memoryBench(b, calibrated) }

func memoryBench(b *testing.B, w work) {
	for _, axes := range []int{1, 4} {
		b.Run("axes="+strconv.Itoa(axes), func(b *testing.B) {
			s, err := memory.New(policies(b, axes), memory.Options{})
			if err != nil {
				b.Fatal(err)
			}
			admit(b, s, w)
		})
	}
}
