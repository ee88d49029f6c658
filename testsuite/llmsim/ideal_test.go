package llmsim

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdealFillsTheLimit checks Ideal on equal calls without a short
// window: a full 5000-token bucket lets 7 calls of 700 go at once and one
// every 0.14 s after (the first of them 0.12 s in), 78 in ten seconds.
func TestIdealFillsTheLimit(t *testing.T) {
	m := Model{Provider: Anthropic, Name: "m", RequestsPerMinute: 10, InputTokensPerMinute: 5000, Period: time.Second}
	calls := make([]Charge, 200)
	for i := range calls {
		calls[i] = Charge{Requests: 1, InputTokens: 700, Tokens: 700}
	}
	n, tokens := Ideal(m, calls, 10*time.Second)
	require.Equal(t, 78, n)
	require.EqualValues(t, 78*700, tokens)
}

// TestIdealSeesAxesTakeTurns checks what a per-second window does to a mix
// of small and large calls: the request axis holds a small call for 0.1 s,
// the token axis a large one for 0.324 s, and neither banks the other's
// idle time, so the limiter takes about 1740 tokens per 0.424 s: 82 % of
// the token limit, for any client.
func TestIdealSeesAxesTakeTurns(t *testing.T) {
	m := Model{Provider: Anthropic, Name: "m", RequestsPerMinute: 10, InputTokensPerMinute: 5000, Period: time.Second, Window: time.Second / 60}
	calls := make([]Charge, 400)
	for i := range calls {
		in := int64(120)
		if i%2 == 1 {
			in = 1620
		}
		calls[i] = Charge{Requests: 1, InputTokens: in, Tokens: in}
	}
	_, tokens := Ideal(m, calls, 30*time.Second)
	require.InDelta(t, 1740/0.424/5000, float64(tokens)/30/5000, 0.01)

	m.Window = 0
	_, whole := Ideal(m, calls, 30*time.Second)
	require.Greater(t, float64(whole)/(31*5000), 0.99, "a limit enforced over the whole period banks the request axis's idle time")
}

// TestChargesRecordWhatTheLimiterKept checks an Anthropic call's charge is
// recorded net of the output tokens its answer did not use.
func TestChargesRecordWhatTheLimiterKept(t *testing.T) {
	f := newFixture(t, Config{RecordCharges: true, Models: []Model{{Provider: Anthropic, Name: "m", RequestsPerMinute: 60, OutputTokensPerMinute: 10000}}})
	r := f.anthropic(t, "k", "m", "hello there, model", 500)
	require.Equal(t, http.StatusOK, r.status)
	got := f.sim.Charges("m")
	require.Len(t, got, 1)
	require.EqualValues(t, 1, got[0].Requests)
	require.Less(t, got[0].OutputTokens, int64(500), "the unused output was given back")
	require.EqualValues(t, int64(r.num("usage.output_tokens")), got[0].OutputTokens)

	plain := newFixture(t, Config{Models: []Model{{Provider: Anthropic, Name: "m", RequestsPerMinute: 60}}})
	plain.anthropic(t, "k", "m", "hi", 10)
	require.Empty(t, plain.sim.Charges("m"), "not recorded unless asked")
}
