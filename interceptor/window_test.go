package interceptor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// windowSim is a provider that states 600 requests a minute and enforces
// them per second, as OpenAI and Anthropic document they may: 10 at once
// at most, refilled at 10 a second.
func windowSim(model string) llmsim.Config {
	return llmsim.Config{
		Models: []llmsim.Model{{Provider: llmsim.OpenAI, Name: model, RequestsPerMinute: 600,
			Period: time.Minute, Window: time.Second}},
		Latency: llmsim.Latency{Fixed: 20 * time.Millisecond},
	}
}

// A burst of calls against a provider that enforces its per-minute limit
// per second, governed by the published per-minute limit and nothing else
// (no burst set by hand): Tollgate starts a second's worth at once and
// the rest at the limit's rate, so the provider refuses a handful of
// calls at most, and the margin those teach keeps the rest from it.
// (With Burst set to the whole minute, the same burst meets a 429 for
// most of its calls: llmsim's window_test.go shows the provider's side.)
func TestBurstAgainstAProviderEnforcingPerSecond(t *testing.T) {
	const n = 50
	run := func(t *testing.T, model string, limit quota.Limit) (llmsim.Stats, quota.Snapshot) {
		e := newEnv(t, windowSim(model))
		ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{openaiKey(model): {Limits: []quota.Limit{limit}}})
		require.NoError(t, err)
		store, err := redis.New(redistest.Start(t), ps, redis.Options{})
		require.NoError(t, err)
		_, sl := e.startWorker(interceptor.Options{Store: store})
		e.burst(model, model, n, sl)
		st := e.sim.Stats(model)
		if st.TooManyRequests > 0 {
			for _, sec := range e.sim.Series(model) {
				t.Logf("second %s: accepted %d, 429 %d", sec.Start.Format("05"), sec.Accepted, sec.TooManyRequests)
			}
		}
		snap, err := store.Snapshot(t.Context(), openaiKey(model))
		require.NoError(t, err)
		return st, snap
	}

	st, snap := run(t, "gpt-window", quota.PerMinute(quota.Requests, 600))
	require.EqualValues(t, n, st.Accepted, "every call ran")
	require.LessOrEqual(t, st.TooManyRequests, int64(3), "a handful of 429s at most")
	t.Logf("default burst: %d calls, %d provider 429s, margin %+v", n, st.TooManyRequests, snap.Margin)
}
