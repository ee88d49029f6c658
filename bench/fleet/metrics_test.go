package main

import (
	"bytes"
	"encoding/json"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	base := counts{
		Window: 30 * time.Second, Period: time.Second,
		RequestLimit: 10, InputTokenLimit: 5000,
		ProviderCalls: 220, Provider429: 11,
		CompletedCalls: 200, ActivityAttempts: 350,
		Latencies: []time.Duration{4 * time.Second, time.Second, 3 * time.Second, 2 * time.Second},
		Completed: 4, Total: 5, PeakSlots: 7,
	}
	for _, tc := range []struct {
		name                 string
		accepted, tokens     int64
		goodput, reqUse, tok float64
		binding              string
	}{
		// A full bucket lets capacity + rate × window through: 10 + 10×30.
		{"requests bind", 310, 77_500, 1, 1, 0.5, "requests"},
		{"input tokens bind", 217, 148_800, 0.96, 0.7, 0.96, "input_tokens"},
		{"idle provider", 0, 0, 0, 0, 0, "requests"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.WindowAccepted, c.WindowInputTokens = tc.accepted, tc.tokens
			r := summarize("setup", c)
			require.InDelta(t, tc.goodput, r.Goodput, 1e-9)
			require.InDelta(t, tc.reqUse, r.RequestUtilization, 1e-9)
			require.InDelta(t, tc.tok, r.InputTokenUtilization, 1e-9)
			require.Equal(t, tc.binding, r.BindingAxis)
			require.InDelta(t, 5, r.Provider429Per100, 1e-9)
			require.InDelta(t, 1.75, r.AttemptsPerCall, 1e-9, "activity attempts per completed call")
			require.InDelta(t, 1.1, r.ProviderCallsPerCall, 1e-9, "provider calls per completed call")
			require.Equal(t, 2000.0, r.P50Ms)
			require.Equal(t, 4000.0, r.P99Ms)
			require.EqualValues(t, 7, r.PeakSlots)
			require.Equal(t, 4, r.Completed)
			require.Equal(t, 5, r.Total)
			require.Equal(t, 1, r.Lost)
		})
	}
}

// TestGoodputCountsTheBurstTheProviderAllows checks the goodput's
// denominator under a shorter enforcement window: a provider enforcing 10
// per second over a tenth of a second lets 1 go at once, not 10, so 301
// calls in a 30 s window is the most it accepts.
func TestGoodputCountsTheBurstTheProviderAllows(t *testing.T) {
	c := counts{Window: 30 * time.Second, Period: time.Second, Enforcement: 100 * time.Millisecond, RequestLimit: 10, WindowAccepted: 301}
	require.InDelta(t, 1, summarize("s", c).Goodput, 1e-9)
	c.Enforcement = 0
	require.InDelta(t, 301.0/310, summarize("s", c).Goodput, 1e-9, "without a window the whole limit may go at once")
	c.Enforcement = time.Second
	require.InDelta(t, 301.0/310, summarize("s", c).Goodput, 1e-9, "a window of the whole period is no window")
}

func TestSummarizeOverLimit(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limit, peak  int64
		wantOverBy   int64
		wantInResult int64
	}{
		{"held at the limit", 3, 3, 0, 3},
		{"below it", 3, 1, 0, 3},
		{"over it", 3, 5, 2, 3},
		{"no limit", 0, 9, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := summarize("s", counts{Window: time.Second, Period: time.Second, ConcurrencyLimit: tc.limit, ProviderPeakInFlight: tc.peak})
			require.Equal(t, tc.wantOverBy, r.OverLimit)
			require.Equal(t, tc.wantInResult, r.ConcurrencyLimit)
			require.Equal(t, tc.peak, r.ProviderPeakInFlight)
		})
	}
}

func TestSummarizeWithNothingToDivideBy(t *testing.T) {
	r := summarize("empty", counts{Window: time.Second, Period: time.Second})
	require.Zero(t, r.Goodput)
	require.Zero(t, r.Provider429Per100)
	require.Zero(t, r.AttemptsPerCall)
	require.Zero(t, r.ProviderCallsPerCall)
	require.Zero(t, r.P99Ms)
	_, err := json.Marshal(r) // no NaN or Inf to refuse
	require.NoError(t, err)
}

func TestPercentileIsNearestRank(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond // 100 ms … 1 ms
	}
	require.Equal(t, 50*time.Millisecond, percentile(ds, 0.5))
	require.Equal(t, 99*time.Millisecond, percentile(ds, 0.99))
	require.Equal(t, 100*time.Millisecond, percentile(ds, 1))
	require.Equal(t, 100*time.Millisecond, ds[0], "the input is not sorted in place")
	require.Zero(t, percentile(nil, 0.5))
}

// fleet.json is a list with one object per setup carrying at least the
// documented fields, with these names and JSON types.
func TestFleetJSONShape(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeJSON(&buf, []Result{
		summarize("no-governor", counts{Window: time.Second, Period: time.Second, RequestLimit: 1, WindowAccepted: 1, Total: 2, Completed: 1}),
		summarize("tollgate-redis", counts{Window: time.Second, Period: time.Second, RequestLimit: 1, WindowAccepted: 2, Total: 2, Completed: 2}),
	}))
	var got []map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	require.Len(t, got, 2)
	want := map[string]string{
		"name": "string", "goodput": "number", "provider_429_per_100": "number", "attempts_per_call": "number",
		"provider_calls_per_call": "number",
		"p50_ms":                  "number", "p99_ms": "number", "peak_slots": "number", "completed": "number", "total": "number",
		"lost": "number", "over_limit": "number", "provider_peak_in_flight": "number",
	}
	for _, obj := range got {
		for field, typ := range want {
			require.Contains(t, obj, field)
			switch typ {
			case "string":
				require.IsType(t, "", obj[field], field)
			case "number":
				require.IsType(t, 0.0, obj[field], field)
			}
		}
	}
	require.Equal(t, "no-governor", got[0]["name"])
	require.Equal(t, 0.5, got[0]["goodput"])
	require.Equal(t, 1.0, got[1]["goodput"])
	require.EqualValues(t, 2, got[1]["completed"])
}

func TestPrintTableHasOneLinePerSetup(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printTable(&buf, []Result{{Name: "a", BindingAxis: "requests"}, {Name: "b", BindingAxis: "input_tokens"}}, false))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[2], "input tok")
	require.NotContains(t, lines[0], "lost")
}

func TestPrintTableOfFaultRuns(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, printTable(&buf, []Result{{Name: "tollgate-redis", BindingAxis: "requests", Provider429Per100: 0.5, Lost: 2, OverLimit: 3}}, true))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	at := func(fields []string, s string) int {
		for i, f := range fields {
			if f == s {
				return i
			}
		}
		t.Fatalf("%q not in %q", s, fields)
		return -1
	}
	require.Equal(t, at(head, "429/100")+1, at(head, "lost"), "lost follows 429/100")
	require.Equal(t, "over", head[at(head, "lost")+1])
	// The header's "req use", "tok use" and "over limit" are two words each;
	// the row's "requests" binding one.
	require.Equal(t, []string{"0.50", "2", "3"}, row[5:8])
}

func TestFaultVerdict(t *testing.T) {
	ok := Result{Name: "tollgate-redis", ConcurrencyLimit: 3, ProviderPeakInFlight: 3, Provider429Per100: 1, Completed: 5, Total: 5}
	require.NotContains(t, faultVerdict(ok), "MISSED")
	over := ok
	over.ProviderPeakInFlight, over.OverLimit = 4, 1
	require.Contains(t, faultVerdict(over), "provider peak in flight 4 ≤ 3 (over_limit 1) MISSED")
	lost := ok
	lost.Lost = 1
	require.Contains(t, faultVerdict(lost), "lost 1 = 0 MISSED")
	rateLimited := ok
	rateLimited.Provider429Per100 = 1.5
	require.Contains(t, faultVerdict(rateLimited), "429/100 1.50 ≤ 1 MISSED")
}

func TestVerdict(t *testing.T) {
	ok := Result{Name: "tollgate-redis", Goodput: 0.97, Provider429Per100: 0.1, AttemptsPerCall: 1.01, Completed: 3, Total: 3}
	require.NotContains(t, verdict(ok), "MISSED")
	missed := ok
	missed.Completed = 2
	require.Contains(t, verdict(missed), "completed 2/3 MISSED")
	retried := ok
	retried.AttemptsPerCall, retried.ProviderCallsPerCall = 1.9, 1
	require.Contains(t, verdict(retried), "attempts/call 1.90 ≤ 1.2 MISSED (calls/call 1.00)")
}

// TestExactGoodput checks the goodput against an exact client: a run that
// took 60 of the calls the exact client takes 78 of (equal calls, a 10 s
// window, see llmsim's TestIdealFillsTheLimit) scores 60/78, Exact
// overrides the limit's goodput, and too few calls to fill the window
// leave no exact figure.
func TestExactGoodput(t *testing.T) {
	m := llmsim.Model{Provider: llmsim.Anthropic, Name: "m", RequestsPerMinute: 10, InputTokensPerMinute: 5000, Period: time.Second}
	calls := make([]llmsim.Charge, 200)
	for i := range calls {
		calls[i] = llmsim.Charge{Requests: 1, InputTokens: 700, Tokens: 700}
	}
	g := exactGoodput(m, calls, 60, 10*time.Second)
	require.InDelta(t, 60.0/78, g, 1e-9)
	r := summarize("s", counts{Window: 10 * time.Second, Period: time.Second, RequestLimit: 10, InputTokenLimit: 5000, WindowAccepted: 60, WindowInputTokens: 42000, Exact: g})
	require.InDelta(t, 60.0/78, r.Goodput, 1e-9)
	require.InDelta(t, 42000.0/55000, r.InputTokenUtilization, 1e-9, "tok use still counts the limit")
	require.Zero(t, exactGoodput(m, calls[:50], 50, 10*time.Second), "50 calls cannot fill ten seconds")
}
