package llmsim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBucketsRefuseExactlyAtRate fills each axis to its configured capacity
// with a fixed clock, checks the next call is refused with the exact wait, and
// that exactly the refilled amount is admitted after that wait.
func TestBucketsRefuseExactlyAtRate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		model      Model
		maxTokens  int64
		admitted   int           // calls that fit a full bucket
		retryAfter string        // on the first refusal
		refill     time.Duration // time that earns exactly one more call
		axis       string        // OpenAI error type / Anthropic message unit
	}{
		{"openai requests per minute", Model{Provider: OpenAI, Name: "m", RequestsPerMinute: 60}, 10, 60, "1", time.Second, "requests"},
		{"openai tokens per minute", Model{Provider: OpenAI, Name: "m", TokensPerMinute: 1000}, 100, 10, "6", 6 * time.Second, "tokens"},
		{"openai tokens charged at the prompt when larger", Model{Provider: OpenAI, Name: "m", TokensPerMinute: 600}, 1, 6, "10", 10 * time.Second, "tokens"},
		{"anthropic requests per minute", Model{Provider: Anthropic, Name: "m", RequestsPerMinute: 5}, 10, 5, "12", 12 * time.Second, "requests"},
		{"anthropic input tokens per minute", Model{Provider: Anthropic, Name: "m", InputTokensPerMinute: 600}, 10, 6, "10", 10 * time.Second, "input tokens"},
		// Answers fill max_tokens here, so Anthropic's correction of the
		// output charge at the end gives nothing back.
		{"anthropic output tokens per minute", Model{Provider: Anthropic, Name: "m", OutputTokensPerMinute: 300}, 100, 3, "20", 20 * time.Second, "output tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{Models: []Model{tc.model}})
			prompt := strings.Repeat("p", 400) // 100 estimated input tokens
			send := func() reply {
				if tc.model.Provider == OpenAI {
					return f.openai(t, "k", "m", prompt, tc.maxTokens)
				}
				return f.anthropic(t, "k", "m", prompt, tc.maxTokens)
			}
			for i := 0; i < tc.admitted; i++ {
				require.Equal(t, http.StatusOK, send().status, "call %d", i+1)
			}
			r := send()
			require.Equal(t, http.StatusTooManyRequests, r.status)
			require.Equal(t, tc.retryAfter, r.header.Get("retry-after"))
			if tc.model.Provider == OpenAI {
				require.Equal(t, tc.axis, r.str("error.type"))
				require.Equal(t, "rate_limit_exceeded", r.str("error.code"))
			} else {
				require.Equal(t, "rate_limit_error", r.str("error.type"))
				require.Contains(t, r.str("error.message"), tc.axis)
			}

			f.clock.Advance(tc.refill - time.Millisecond)
			require.Equal(t, http.StatusTooManyRequests, send().status, "a millisecond early")
			f.clock.Advance(time.Millisecond)
			require.Equal(t, http.StatusOK, send().status, "after exactly the refill time")
			require.Equal(t, http.StatusTooManyRequests, send().status, "one refill admits one call")

			st := f.sim.Stats("m")
			require.EqualValues(t, tc.admitted+1, st.Accepted)
			require.EqualValues(t, 3, st.TooManyRequests)
		})
	}
}

func TestRequestsPerDay(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerDay: 2}}})
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "x", 1).status)
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "x", 1).status)
	r := f.openai(t, "k", "m", "x", 1)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	// epoch is 03:04:05.5; midnight is 20:55:54.5 away, sent rounded up.
	require.Equal(t, "75355", r.header.Get("retry-after"))
	f.clock.Advance(75355 * time.Second)
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "x", 1).status)
}

func TestOversizeCallHasNoRetryAfter(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", TokensPerMinute: 50}}})
	r := f.openai(t, "k", "m", "x", 100)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Empty(t, r.header.Get("retry-after"), "a call larger than the bucket can never fit")
	require.Contains(t, r.str("error.message"), "Request too large")
}

func TestLimitsArePerAccount(t *testing.T) {
	f := newFixture(t, Config{
		Models:   []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 1}},
		Accounts: []Account{{Name: "a", APIKey: "ka"}, {Name: "b", APIKey: "kb"}},
	})
	require.Equal(t, http.StatusOK, f.openai(t, "ka", "m", "x", 1).status)
	require.Equal(t, http.StatusTooManyRequests, f.openai(t, "ka", "m", "x", 1).status)
	require.Equal(t, http.StatusOK, f.openai(t, "kb", "m", "x", 1).status)
}

func TestOpenAIHeaders(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 60, TokensPerMinute: 6000}}})
	// 6000 TPM refills 100 tokens/s; max_tokens 150 > 1 prompt token.
	r := f.openai(t, "k", "m", "hi", 150)
	require.Equal(t, http.StatusOK, r.status)
	want := map[string]string{
		"x-ratelimit-limit-requests":     "60",
		"x-ratelimit-remaining-requests": "59",
		"x-ratelimit-reset-requests":     "1s",
		"x-ratelimit-limit-tokens":       "6000",
		"x-ratelimit-remaining-tokens":   "5850",
		"x-ratelimit-reset-tokens":       "1.5s",
	}
	for k, v := range want {
		require.Equal(t, v, r.header.Get(k), k)
	}

	f.clock.Advance(20 * time.Millisecond)
	r = f.openai(t, "k", "m", "hi", 5850) // takes what is left (plus the 2 tokens refilled)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "2", r.header.Get("x-ratelimit-remaining-tokens"))
	require.Equal(t, "59.98s", r.header.Get("x-ratelimit-reset-tokens"))
	require.Equal(t, "1.98s", r.header.Get("x-ratelimit-reset-requests"))

	r = f.openai(t, "k", "m", "hi", 100)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "1", r.header.Get("retry-after"), "98 tokens short at 100/s")
	require.Equal(t, "2", r.header.Get("x-ratelimit-remaining-tokens"), "a refused call charges nothing")
	require.Equal(t, "58", r.header.Get("x-ratelimit-remaining-requests"))
}

func TestAnthropicHeaders(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{
		Provider: Anthropic, Name: "m", RequestsPerMinute: 60, InputTokensPerMinute: 600, OutputTokensPerMinute: 1200,
	}}})
	// 40 chars → 10 input tokens (10/s refill); max_tokens 100 (20/s refill),
	// of which the 65-character answer uses 17: the rest is given back.
	r := f.anthropic(t, "k", "m", strings.Repeat("a", 40), 100)
	require.Equal(t, http.StatusOK, r.status)
	want := map[string]string{
		"anthropic-ratelimit-requests-limit":          "60",
		"anthropic-ratelimit-requests-remaining":      "59",
		"anthropic-ratelimit-requests-reset":          "2026-01-02T03:04:07Z", // 06.5 rounded up
		"anthropic-ratelimit-input-tokens-limit":      "600",
		"anthropic-ratelimit-input-tokens-remaining":  "590",
		"anthropic-ratelimit-input-tokens-reset":      "2026-01-02T03:04:07Z",
		"anthropic-ratelimit-output-tokens-limit":     "1200",
		"anthropic-ratelimit-output-tokens-remaining": "1183",
		"anthropic-ratelimit-output-tokens-reset":     "2026-01-02T03:04:07Z", // 06.35 rounded up
		"anthropic-ratelimit-tokens-limit":            "600",                  // input has less remaining
		"anthropic-ratelimit-tokens-remaining":        "590",
		"anthropic-ratelimit-tokens-reset":            "2026-01-02T03:04:07Z",
	}
	for k, v := range want {
		require.Equal(t, v, r.header.Get(k), k)
	}
	reset, err := time.Parse(time.RFC3339, r.header.Get("anthropic-ratelimit-requests-reset"))
	require.NoError(t, err)
	require.True(t, reset.After(epoch))
}

func TestHeadersOnErrors(t *testing.T) {
	f := newFixture(t, Config{
		Models:   []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 10}},
		Accounts: []Account{{Name: "a", APIKey: "k", SpendCapTokens: 1}},
	})
	require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "x", 1).status)
	r := f.openai(t, "k", "m", "x", 1)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "insufficient_quota", r.str("error.code"))
	require.Equal(t, "9", r.header.Get("x-ratelimit-remaining-requests"))
}

// TestPeriodCompressesTheMinute counts admissions with a fake clock under a
// one-second Period: the per-minute limits become per-second ones, and the
// headers and retry-after say so.
func TestPeriodCompressesTheMinute(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 60, TokensPerMinute: 6000, Period: time.Second}}})
		r := f.openai(t, "k", "m", "hi", 60)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "60", r.header.Get("x-ratelimit-limit-requests"))
		require.Equal(t, "17ms", r.header.Get("x-ratelimit-reset-requests"), "one request of 60 per second")
		require.Equal(t, "10ms", r.header.Get("x-ratelimit-reset-tokens"), "60 tokens of 6000 per second")
		for i := 1; i < 60; i++ {
			require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 60).status, "call %d", i+1)
		}
		r = f.openai(t, "k", "m", "hi", 60)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		require.Equal(t, "1", r.header.Get("retry-after"))
		require.Equal(t, "17", r.header.Get("retry-after-ms"), "1/60 s, rounded up")
		require.Equal(t, "1s", r.header.Get("x-ratelimit-reset-requests"))

		// Ten seconds admit exactly 600 more calls, as ten minutes would
		// without compression.
		admitted := 0
		for range 10 {
			f.clock.Advance(time.Second)
			for f.openai(t, "k", "m", "hi", 60).status == http.StatusOK {
				admitted++
			}
		}
		require.Equal(t, 600, admitted)
		require.EqualValues(t, 660, f.sim.Stats("m").Accepted)
	})
	t.Run("anthropic", func(t *testing.T) {
		f := newFixture(t, Config{Models: []Model{{Provider: Anthropic, Name: "m", RequestsPerMinute: 1000, InputTokensPerMinute: 1000, OutputTokensPerMinute: 1000, Period: time.Second}}})
		prompt := strings.Repeat("p", 400) // 100 input tokens
		for i := range 10 {
			require.Equal(t, http.StatusOK, f.anthropic(t, "k", "m", prompt, 10).status, "call %d", i+1)
		}
		r := f.anthropic(t, "k", "m", prompt, 10)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		require.Equal(t, "100", r.header.Get("retry-after-ms"), "100 input tokens at 1000/s")
		require.Equal(t, "0", r.header.Get("anthropic-ratelimit-input-tokens-remaining"))
		require.Equal(t, "2026-01-02T03:04:07Z", r.header.Get("anthropic-ratelimit-input-tokens-reset"), "full again in 1 s, 06.5 rounded up")
		f.clock.Advance(99 * time.Millisecond)
		require.Equal(t, http.StatusTooManyRequests, f.anthropic(t, "k", "m", prompt, 10).status)
		f.clock.Advance(time.Millisecond)
		require.Equal(t, http.StatusOK, f.anthropic(t, "k", "m", prompt, 10).status)
	})
	t.Run("a minute sends no retry-after-ms", func(t *testing.T) {
		f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "m", RequestsPerMinute: 1}}})
		require.Equal(t, http.StatusOK, f.openai(t, "k", "m", "hi", 1).status)
		r := f.openai(t, "k", "m", "hi", 1)
		require.Equal(t, "60", r.header.Get("retry-after"))
		require.Empty(t, r.header.Get("retry-after-ms"))
	})
}
