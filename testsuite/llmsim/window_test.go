package llmsim

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWindowEnforcesTheMinutePerSecond runs a 60-per-minute limit enforced
// over one second on each provider: a second call half a second after the
// first is refused with the wait the window gives, one a second after is
// admitted, and the per-minute remaining is what the headers report.
func TestWindowEnforcesTheMinutePerSecond(t *testing.T) {
	for _, tc := range []struct {
		provider  string
		remaining string // header with the per-minute requests remaining; "" for Gemini
	}{
		{OpenAI, "x-ratelimit-remaining-requests"},
		{Anthropic, "anthropic-ratelimit-requests-remaining"},
		{Gemini, ""},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			f := newFixture(t, Config{Models: []Model{{Provider: tc.provider, Name: "m", RequestsPerMinute: 60, Window: time.Second}}})
			send := func() reply {
				switch tc.provider {
				case OpenAI:
					return f.openai(t, "k", "m", "hi", 10)
				case Anthropic:
					return f.anthropic(t, "k", "m", "hi", 10)
				}
				return f.gemini(t, "k", "m", "hi", 10)
			}
			r := send()
			require.Equal(t, http.StatusOK, r.status)
			if tc.remaining != "" {
				require.Equal(t, "59", r.header.Get(tc.remaining))
			}

			f.clock.Advance(500 * time.Millisecond)
			r = send()
			require.Equal(t, http.StatusTooManyRequests, r.status, "the one-second window holds one request")
			switch tc.provider {
			case OpenAI:
				require.Equal(t, "1", r.header.Get("retry-after"), "half a second, rounded up")
				require.Equal(t, "requests", r.str("error.type"))
				require.Contains(t, r.str("error.message"), "Limit 60, Requested 1", "the error names the per-minute limit")
				require.Contains(t, r.str("error.message"), "try again in 500ms")
				require.Equal(t, "59", r.header.Get(tc.remaining), "59.5 left of the minute: the window refused, not the minute")
			case Anthropic:
				require.Equal(t, "1", r.header.Get("retry-after"))
				require.Equal(t, "rate_limit_error", r.str("error.type"))
				require.Equal(t, "59", r.header.Get(tc.remaining))
			case Gemini:
				require.Contains(t, r.quotaID(), "PerMinute")
				require.Equal(t, "0.5s", r.rpcDetail("RetryInfo")["retryDelay"])
			}

			f.clock.Advance(499 * time.Millisecond)
			require.Equal(t, http.StatusTooManyRequests, send().status, "a millisecond early")
			f.clock.Advance(time.Millisecond)
			r = send()
			require.Equal(t, http.StatusOK, r.status, "a second after the first call")
			if tc.remaining != "" {
				require.Equal(t, "59", r.header.Get(tc.remaining), "the minute refilled to 60 and took one")
			}
			require.EqualValues(t, 2, f.sim.Stats("m").Accepted)
		})
	}
}

// TestWindowHeadersReportTheMinute checks the rate-limit headers follow the
// per-minute buckets while a two-second window (2 requests, 200 tokens of a
// 60 RPM, 6000 TPM limit) refuses.
func TestWindowHeadersReportTheMinute(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 60, TokensPerMinute: 6000, Window: 2 * time.Second}}})
		require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 50).status)
		r := f.openai(t, "k", "m", "hi", 50)
		require.Equal(t, http.StatusOK, r.status)
		want := map[string]string{
			"x-ratelimit-limit-requests":     "60",
			"x-ratelimit-remaining-requests": "58",
			"x-ratelimit-reset-requests":     "2s",
			"x-ratelimit-limit-tokens":       "6000",
			"x-ratelimit-remaining-tokens":   "5900",
			"x-ratelimit-reset-tokens":       "1s",
		}
		for k, v := range want {
			require.Equal(t, v, r.header.Get(k), k)
		}
		r = f.openai(t, "k", "m", "hi", 50)
		require.Equal(t, http.StatusTooManyRequests, r.status, "the window's two requests are spent")
		require.Equal(t, "1", r.header.Get("retry-after"), "one request a second")
		require.Equal(t, "58", r.header.Get("x-ratelimit-remaining-requests"))
		require.Equal(t, "5900", r.header.Get("x-ratelimit-remaining-tokens"))
	})
	t.Run("anthropic", func(t *testing.T) {
		f := newFixture(t, Config{Models: []Model{{Provider: Anthropic, Name: "m", RequestsPerMinute: 60, Window: 2 * time.Second}}})
		require.Equal(t, http.StatusOK, f.anthropic(t, "k", "m", "hi", 10).status)
		r := f.anthropic(t, "k", "m", "hi", 10)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "60", r.header.Get("anthropic-ratelimit-requests-limit"))
		require.Equal(t, "58", r.header.Get("anthropic-ratelimit-requests-remaining"))
		require.Equal(t, "2026-01-02T03:04:08Z", r.header.Get("anthropic-ratelimit-requests-reset"), "full in 2 s: 07.5 rounded up")
		r = f.anthropic(t, "k", "m", "hi", 10)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		require.Equal(t, "58", r.header.Get("anthropic-ratelimit-requests-remaining"))
	})
}

// TestWindowServesACallLargerThanItsShare sends a 1,000-token call through a
// window holding 100 tokens (6000 TPM over one second): a full window takes
// it, and the next call waits until the 900-token debt is repaid.
func TestWindowServesACallLargerThanItsShare(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", TokensPerMinute: 6000, Window: time.Second}}})
	r := f.openai(t, "k", "m", "hi", 1000)
	require.Equal(t, http.StatusOK, r.status, "a full window takes a call larger than its share")
	require.Equal(t, "5000", r.header.Get("x-ratelimit-remaining-tokens"))

	r = f.openai(t, "k", "m", "hi", 100)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "tokens", r.str("error.type"))
	require.Equal(t, "10", r.header.Get("retry-after"), "900 tokens of debt and 100 more, at 100/s")
	require.Contains(t, r.str("error.message"), "Limit 6000, Requested 100")

	f.clock.Advance(10*time.Second - time.Millisecond)
	require.Equal(t, http.StatusTooManyRequests, f.openai(t, "k", "m", "hi", 100).status, "a millisecond early")
	f.clock.Advance(time.Millisecond)
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 100).status)

	r = f.openai(t, "k", "m", "hi", 7000)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Empty(t, r.header.Get("retry-after"), "a call larger than the minute's limit still never fits")
	require.Contains(t, r.str("error.message"), "Request too large")
}

// TestWindowBelowOneRequest enforces 10 requests a second over 1/60 of a
// second, a window holding a sixth of a request: a full window admits one,
// and calls are then admitted exactly 100 ms apart.
func TestWindowBelowOneRequest(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 10, Period: time.Second, Window: time.Second / 60}}})
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 1).status)
	r := f.openai(t, "k", "m", "hi", 1)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "100", r.header.Get("retry-after-ms"))
	f.clock.Advance(99 * time.Millisecond)
	require.Equal(t, http.StatusTooManyRequests, f.openai(t, "k", "m", "hi", 1).status)
	f.clock.Advance(time.Millisecond)
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 1).status)

	// Ten milliseconds at a time for two seconds: 20 more, never two close
	// together, where the period bucket alone would admit 10 at once.
	admitted := 0
	for range 200 {
		f.clock.Advance(10 * time.Millisecond)
		if f.openai(t, "k", "m", "hi", 1).status == http.StatusOK {
			admitted++
		}
	}
	require.Equal(t, 20, admitted)
}

// TestWindowRefundsToBothBuckets checks Anthropic's output-token correction
// gives the unused tokens back to the window bucket as well as the minute's.
func TestWindowRefundsToBothBuckets(t *testing.T) {
	// 1200 output tokens a minute over one second: a window of 20, refilled
	// at 20/s. max_tokens 100, of which the answer uses 17 (see
	// TestAnthropicHeaders): the window goes to -80, and gets 83 back.
	f := newFixture(t, Config{Models: []Model{{Provider: Anthropic, Name: "m", OutputTokensPerMinute: 1200, Window: time.Second}}})
	prompt := strings.Repeat("a", 40)
	r := f.anthropic(t, "k", "m", prompt, 100)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "1183", r.header.Get("anthropic-ratelimit-output-tokens-remaining"))

	r = f.anthropic(t, "k", "m", prompt, 100)
	require.Equal(t, http.StatusTooManyRequests, r.status, "3 tokens in the window; it must be full (20) to take 100")
	require.Equal(t, "1", r.header.Get("retry-after"), "17 tokens at 20/s is 0.85 s, not the 5 s that 80 of debt would take")
	f.clock.Advance(849 * time.Millisecond)
	require.Equal(t, http.StatusTooManyRequests, f.anthropic(t, "k", "m", prompt, 100).status)
	f.clock.Advance(time.Millisecond)
	require.Equal(t, http.StatusOK, f.anthropic(t, "k", "m", prompt, 100).status)
}

// TestWindowOfThePeriod checks a window of zero or of the whole period is
// one bucket holding the whole limit: 60 calls at once.
func TestWindowOfThePeriod(t *testing.T) {
	for _, tc := range []struct {
		name           string
		window, period time.Duration
	}{
		{"zero", 0, 0},
		{"the minute", time.Minute, 0},
		{"the period", time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 60, Period: tc.period, Window: tc.window}}})
			for i := range 60 {
				require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 1).status, "call %d", i+1)
			}
			require.Equal(t, http.StatusTooManyRequests, f.openai(t, "k", "m", "hi", 1).status)
		})
	}
}

func TestWindowConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`models: [{provider: anthropic, name: x, requests_per_minute: 50, window: 1s}]`))
	require.NoError(t, err)
	require.Equal(t, time.Second, c.Models[0].Window)

	for _, tc := range []struct {
		name, doc, problem string
	}{
		{"negative", `models: [{provider: openai, name: x, window: -1s}]`, "is negative"},
		{"longer than the minute", `models: [{provider: openai, name: x, window: 2m}]`, "is longer than the period (1m0s)"},
		{"longer than the period", `models: [{provider: openai, name: x, period: 1s, window: 2s}]`, "is longer than the period (1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "%v", err)
			require.Equal(t, "models[0].window", ce.Field)
			require.Equal(t, tc.problem, ce.Problem)
			require.NotEmpty(t, ce.Fix)
		})
	}
}
