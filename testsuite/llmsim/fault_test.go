package llmsim

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFaults(t *testing.T) {
	models := []Model{{Provider: OpenAI, Name: "gpt-4o"}, {Provider: OpenAI, Name: "gpt-4o-mini"}, {Provider: Anthropic, Name: "claude"}}
	t.Run("four consecutive 429s from one model", func(t *testing.T) {
		f := newFixture(t, Config{Models: models})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultRateLimit, Model: "gpt-4o", Times: 4, RetryAfter: time.Second}))
		for i := 0; i < 4; i++ {
			r := f.openai(t, "k", "gpt-4o", "x", 1)
			require.Equal(t, http.StatusTooManyRequests, r.status, "call %d", i+1)
			require.Equal(t, "1", r.header.Get("retry-after"))
			require.Equal(t, "rate_limit_exceeded", r.str("error.code"))
			require.Equal(t, http.StatusOK, f.openai(t, "k", "gpt-4o-mini", "x", 1).status, "other models are untouched")
		}
		require.Equal(t, http.StatusOK, f.openai(t, "k", "gpt-4o", "x", 1).status, "the rule is spent")
		require.EqualValues(t, 4, f.sim.Stats("gpt-4o").TooManyRequests)
	})
	t.Run("a 429 with retry-after 2", func(t *testing.T) {
		f := newFixture(t, Config{Models: models})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultRateLimit, Times: 1, RetryAfter: 1500 * time.Millisecond}))
		r := f.anthropic(t, "k", "claude", "x", 1)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		require.Equal(t, "2", r.header.Get("retry-after"), "sent in whole seconds, rounded up")
		require.Equal(t, "rate_limit_error", r.str("error.type"))
		require.Equal(t, http.StatusOK, f.anthropic(t, "k", "claude", "x", 1).status)
	})
	t.Run("spend cap after exactly one call", func(t *testing.T) {
		f := newFixture(t, Config{Models: models})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultSpendCap, After: 1, RetryAfter: time.Minute}))
		require.Equal(t, http.StatusOK, f.anthropic(t, "k", "claude", "x", 1).status)
		for i := 0; i < 3; i++ {
			r := f.anthropic(t, "k", "claude", "x", 1)
			require.Equal(t, http.StatusTooManyRequests, r.status)
			require.Equal(t, "enforced_spend_limit_reached", r.str("error.details.error_code"))
			require.Empty(t, r.header.Get("retry-after"), "a spend cap never says when to retry")
		}
		require.EqualValues(t, 3, f.sim.Stats("").SpendCapped)
	})
	t.Run("other kinds", func(t *testing.T) {
		for _, tc := range []struct {
			kind     FaultKind
			status   int
			provider string
			field    string
			want     string
		}{
			{FaultOverload, 529, Anthropic, "error.type", "overloaded_error"},
			{FaultOverload, 503, OpenAI, "error.type", "server_error"},
			{FaultUnauthorized, 401, Anthropic, "error.type", "authentication_error"},
			{FaultUnauthorized, 401, OpenAI, "error.code", "invalid_api_key"},
			{FaultContextLength, 400, OpenAI, "error.code", "context_length_exceeded"},
			{FaultContextLength, 400, Anthropic, "error.type", "invalid_request_error"},
			{FaultServerError, 500, Anthropic, "error.type", "api_error"},
			{FaultServerError, 500, OpenAI, "error.type", "server_error"},
			{FaultSpendCap, 429, OpenAI, "error.type", "insufficient_quota"},
			{FaultInvalidRequest, 400, OpenAI, "error.type", "invalid_request_error"},
			{FaultInvalidRequest, 400, Anthropic, "error.type", "invalid_request_error"},
		} {
			t.Run(string(tc.kind)+" "+tc.provider, func(t *testing.T) {
				f := newFixture(t, Config{Models: models})
				require.NoError(t, f.sim.Inject(Fault{Kind: tc.kind, Provider: tc.provider, Times: 1}))
				var r reply
				if tc.provider == OpenAI {
					r = f.openai(t, "k", "gpt-4o", "x", 1)
				} else {
					r = f.anthropic(t, "k", "claude", "x", 1)
				}
				require.Equal(t, tc.status, r.status)
				require.Equal(t, tc.want, r.str(tc.field))
			})
		}
	})
	t.Run("status override", func(t *testing.T) {
		f := newFixture(t, Config{Models: models})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultOverload, Status: 503, Times: 1}))
		r := f.anthropic(t, "k", "claude", "x", 1)
		require.Equal(t, 503, r.status)
		require.Equal(t, "overloaded_error", r.str("error.type"))
	})
	t.Run("a faulted call charges nothing", func(t *testing.T) {
		f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "gpt-4o", RequestsPerMinute: 1}}})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultOverload, Times: 2}))
		require.Equal(t, 503, f.openai(t, "k", "gpt-4o", "x", 1).status)
		require.Equal(t, 503, f.openai(t, "k", "gpt-4o", "x", 1).status)
		require.Equal(t, http.StatusOK, f.openai(t, "k", "gpt-4o", "x", 1).status)
	})
	t.Run("clear", func(t *testing.T) {
		f := newFixture(t, Config{Models: models})
		require.NoError(t, f.sim.Inject(Fault{Kind: FaultServerError}))
		require.Equal(t, 500, f.openai(t, "k", "gpt-4o", "x", 1).status)
		f.sim.ClearFaults()
		require.Equal(t, http.StatusOK, f.openai(t, "k", "gpt-4o", "x", 1).status)
	})
	t.Run("bad rule", func(t *testing.T) {
		f := newFixture(t, Config{Models: models})
		err := f.sim.Inject(Fault{Kind: FaultRateLimit}, Fault{Kind: "melt"})
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "faults[1].kind", ce.Field)
		require.Equal(t, http.StatusOK, f.openai(t, "k", "gpt-4o", "x", 1).status, "no rule of a bad batch is added")
	})
}

func TestSpendCap(t *testing.T) {
	for _, provider := range []string{OpenAI, Anthropic} {
		t.Run(provider, func(t *testing.T) {
			f := newFixture(t, Config{
				Models:   []Model{{Provider: provider, Name: "m"}},
				Accounts: []Account{{Name: "capped", APIKey: "k1", SpendCapTokens: 25}, {Name: "free", APIKey: "k2"}},
			})
			send := func(key string) reply {
				if provider == OpenAI {
					return f.openai(t, key, "m", "0123456789012345678901234567890123456789", 10) // 10 tokens in
				}
				return f.anthropic(t, key, "m", "0123456789012345678901234567890123456789", 10)
			}
			for f.sim.Spent("capped") < 25 {
				require.Equal(t, http.StatusOK, send("k1").status)
			}
			for i := 0; i < 3; i++ {
				r := send("k1")
				require.Equal(t, http.StatusTooManyRequests, r.status)
				require.Empty(t, r.header.Get("retry-after"))
				if provider == OpenAI {
					require.Equal(t, "insufficient_quota", r.str("error.code"))
					require.Equal(t, "insufficient_quota", r.str("error.type"))
				} else {
					require.Equal(t, "rate_limit_error", r.str("error.type"))
					require.Equal(t, "enforced_spend_limit_reached", r.str("error.details.error_code"))
				}
			}
			require.Equal(t, http.StatusOK, send("k2").status, "caps are per account")

			require.True(t, f.sim.CapSpend("free"), "an account runs out of credit mid-run")
			require.Equal(t, http.StatusTooManyRequests, send("k2").status)
			require.False(t, f.sim.CapSpend("nobody"))
		})
	}
}

func TestOverloadProbability(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		f := newFixture(t, Config{
			Models:   []Model{{Provider: Anthropic, Name: "claude"}, {Provider: OpenAI, Name: "gpt"}},
			Overload: Overload{Probability: 1, RetryAfter: 3 * time.Second},
		})
		r := f.anthropic(t, "k", "claude", "x", 1)
		require.Equal(t, 529, r.status)
		require.Equal(t, "overloaded_error", r.str("error.type"))
		require.Equal(t, "3", r.header.Get("retry-after"))
		require.Equal(t, 503, f.openai(t, "k", "gpt", "x", 1).status)
		require.EqualValues(t, 2, f.sim.Stats("").Overloaded)
	})
	t.Run("a fraction, repeatable by seed", func(t *testing.T) {
		run := func() []int {
			f := newFixture(t, Config{Models: []Model{{Provider: Anthropic, Name: "claude"}}, Overload: Overload{Probability: 0.3}, Seed: 7})
			var statuses []int
			for i := 0; i < 200; i++ {
				statuses = append(statuses, f.anthropic(t, "k", "claude", "x", 1).status)
			}
			st := f.sim.Stats("claude")
			require.InDelta(t, 60, st.Overloaded, 25)
			require.EqualValues(t, 200, st.Overloaded+st.Accepted)
			return statuses
		}
		require.Equal(t, run(), run())
	})
}

func TestStatsAndSeries(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: OpenAI, Name: "a", RequestsPerMinute: 2}, {Provider: OpenAI, Name: "b"}}})
	f.openai(t, "k", "a", "x", 1) // second 0: a accepted
	f.openai(t, "k", "a", "x", 1) // a accepted
	f.openai(t, "k", "a", "x", 1) // a 429
	f.openai(t, "k", "b", "x", 1) // b accepted
	f.clock.Advance(2 * time.Second)
	f.openai(t, "k", "b", "x", 1) // second 2: b accepted
	f.openai(t, "", "b", "x", 1)  // 401: counted, not in the series

	require.Equal(t, Stats{Received: 3, Accepted: 2, TooManyRequests: 1, InputTokens: 2, OutputTokens: f.sim.Stats("a").OutputTokens}, f.sim.Stats("a"))
	b := f.sim.Stats("b")
	require.EqualValues(t, 3, b.Received)
	require.EqualValues(t, 1, b.Failed)

	start := epoch.Truncate(time.Second)
	require.Equal(t, []Second{
		{Start: start, Accepted: 3, TooManyRequests: 1},
		{Start: start.Add(time.Second)},
		{Start: start.Add(2 * time.Second), Accepted: 1},
	}, f.sim.Series(""))
	require.Equal(t, []Second{{Start: start, Accepted: 2, TooManyRequests: 1}}, f.sim.Series("a"))
	require.Nil(t, f.sim.Series("nope"))
}

func TestLatency(t *testing.T) {
	sim, err := New(Config{
		Models:   []Model{{Provider: OpenAI, Name: "m"}},
		Latency:  Latency{Fixed: 10 * time.Millisecond, Jitter: 5 * time.Millisecond},
		Overload: Overload{Probability: 0},
		Seed:     3,
	}, WithClock(NewManualClock(epoch)))
	require.NoError(t, err)
	c := call{model: "m", chars: 4, maxTokens: 1, prompt: "abcd"}
	seen := make(map[time.Duration]bool)
	for i := 0; i < 50; i++ {
		o := sim.decide(openAIDialect{}, "k", c, nil)
		require.Nil(t, o.err)
		require.GreaterOrEqual(t, o.delay, 10*time.Millisecond)
		require.Less(t, o.delay, 15*time.Millisecond)
		seen[o.delay] = true
	}
	require.Greater(t, len(seen), 1, "jitter varies the delay")

	refused := sim.decide(openAIDialect{}, "", c, nil)
	require.NotNil(t, refused.err)
	require.Zero(t, refused.delay, "errors are answered at once")
}
