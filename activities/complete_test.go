package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/internal/testnet"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

const testKey = "sk-tollgate-test-9f8e7d6c5b4a"

// simFixture is an llmsim server and Activities pointed at it.
type simFixture struct {
	sim   *llmsim.Sim
	srv   *httptest.Server
	clock *llmsim.ManualClock
	acts  *Activities
}

func newSimFixture(t *testing.T) *simFixture {
	t.Helper()
	clock := llmsim.NewManualClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	sim, err := llmsim.New(llmsim.Config{
		Models: []llmsim.Model{
			{Provider: llmsim.OpenAI, Name: "gpt-4o", RequestsPerMinute: 60, TokensPerMinute: 6000, ContextWindow: 1000},
			{Provider: llmsim.OpenAI, Name: "gpt-4o-tiny", RequestsPerMinute: 1},
			{Provider: llmsim.Anthropic, Name: "claude-haiku-4-5", RequestsPerMinute: 50, InputTokensPerMinute: 3000, OutputTokensPerMinute: 1200, ContextWindow: 1000},
			{Provider: llmsim.Anthropic, Name: "claude-tiny", RequestsPerMinute: 1},
		},
		Accounts: []llmsim.Account{{Name: "acct", APIKey: testKey}},
	}, llmsim.WithClock(clock))
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &simFixture{sim: sim, srv: srv, clock: clock, acts: newActs(t, srv, testKey)}
}

func newActs(t *testing.T, srv *httptest.Server, key string) *Activities {
	t.Helper()
	acts, err := New(Config{
		OpenAI:    ProviderConfig{APIKey: key, BaseURL: srv.URL + "/v1/", HTTPClient: srv.Client()},
		Anthropic: ProviderConfig{APIKey: key, BaseURL: srv.URL, HTTPClient: srv.Client(), Timeout: 10 * time.Second},
	})
	require.NoError(t, err)
	return acts
}

func chat(provider, model, prompt string) Request {
	return Request{
		Provider: provider, Account: "acct", Model: model,
		System:          "You are terse.",
		Messages:        []Message{{Role: RoleUser, Content: prompt}},
		MaxOutputTokens: 100,
	}
}

func TestCompleteSuccess(t *testing.T) {
	f := newSimFixture(t)
	for _, tc := range []struct {
		name     string
		req      Request
		finish   string
		headers  map[string]string
		requests quota.Observation // learned from the headers by classify.Limits
	}{
		{"openai", chat(OpenAI, "gpt-4o", "What is a token bucket?"), "stop", map[string]string{
			"x-ratelimit-limit-requests":     "60",
			"x-ratelimit-remaining-requests": "59",
			"x-ratelimit-reset-requests":     "1s",
			"x-ratelimit-remaining-tokens":   "5900", // max(100, ceil(37/4))
			"x-ratelimit-reset-tokens":       "1s",
		}, quota.Observation{Axis: quota.Requests, Limit: 60, Remaining: 59, Reset: time.Second}},
		{"anthropic", chat(Anthropic, "claude-haiku-4-5", "What is a token bucket?"), "end_turn", map[string]string{
			"anthropic-ratelimit-requests-limit":         "50",
			"anthropic-ratelimit-requests-remaining":     "49",
			"anthropic-ratelimit-input-tokens-remaining": "2990", // ceil(37/4) = 10
			// max_tokens 100 is charged, the 84 the answer did not use
			// given back when it is known, as Anthropic documents.
			"anthropic-ratelimit-output-tokens-remaining": "1184",
			"anthropic-ratelimit-output-tokens-reset":     "2026-03-04T05:06:08Z", // 16 tokens at 20/s
		}, quota.Observation{Axis: quota.Requests, Limit: 50, Remaining: 49, Reset: 2 * time.Second}}, // 1.2 s, sent as a whole second
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &classify.Recorder{}
			ctx := classify.NewContext(context.Background(), rec)
			resp, err := f.acts.Complete(ctx, tc.req)
			require.NoError(t, err)
			require.Contains(t, resp.Text, "What is a token bucket?")
			require.Equal(t, tc.finish, resp.FinishReason)
			require.Equal(t, tc.req.Provider, resp.Provider)
			require.Equal(t, tc.req.Model, resp.Model)
			require.NotEmpty(t, resp.RequestID)
			require.Equal(t, EstimateTokens(tc.req.Characters()), resp.Usage.InputTokens)
			require.Positive(t, resp.Usage.OutputTokens)
			require.LessOrEqual(t, resp.Usage.OutputTokens, tc.req.MaxOutputTokens)

			status, h, ok := rec.Last()
			require.True(t, ok)
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, 1, rec.Count())
			for k, v := range tc.headers {
				require.Equal(t, v, h.Get(k), k)
			}
			v := classify.Classifier{}.Response(status, h, nil, f.clock.Now())
			require.Equal(t, classify.OK, v.Class)
			require.Contains(t, v.Limits, tc.requests)
		})
	}
	t.Run("assistant turns and temperature", func(t *testing.T) {
		temp := 0.3
		for _, p := range []struct{ provider, model string }{{OpenAI, "gpt-4o"}, {Anthropic, "claude-haiku-4-5"}} {
			req := chat(p.provider, p.model, "first")
			req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: "ok"}, Message{Role: RoleUser, Content: "second"})
			req.Temperature = &temp
			resp, err := f.acts.Complete(context.Background(), req)
			require.NoError(t, err, p.provider)
			require.Contains(t, resp.Text, "second", "the reply answers the last user turn")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		req := chat(Anthropic, "claude-haiku-4-5", strings.Repeat("long ", 100))
		req.MaxOutputTokens = 5
		resp, err := f.acts.Complete(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "max_tokens", resp.FinishReason)
		require.EqualValues(t, 5, resp.Usage.OutputTokens)
	})
}

// failure is what a test expects an error to look like.
type failure struct {
	status     int
	retryAfter string
	openAICode string // *openai.Error Code (or Type when code is null)
	anthropic  string // *anthropic.Error Type()
	errorCode  string // *anthropic.Error ErrorCode()
	class      classify.Class
}

func TestCompleteErrorsAreSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *simFixture) (*Activities, Request)
		want  failure
	}{
		{"openai injected 429 with retry-after 2", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Times: 1, RetryAfter: 2 * time.Second}))
			return f.acts, chat(OpenAI, "gpt-4o", "hi")
		}, failure{status: 429, retryAfter: "2", openAICode: "rate_limit_exceeded", class: classify.RateLimited}},
		{"openai bucket 429", func(t *testing.T, f *simFixture) (*Activities, Request) {
			_, err := f.acts.Complete(context.Background(), chat(OpenAI, "gpt-4o-tiny", "hi"))
			require.NoError(t, err)
			return f.acts, chat(OpenAI, "gpt-4o-tiny", "hi")
		}, failure{status: 429, retryAfter: "60", openAICode: "rate_limit_exceeded", class: classify.RateLimited}},
		{"openai spend cap", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultSpendCap}))
			return f.acts, chat(OpenAI, "gpt-4o", "hi")
		}, failure{status: 429, openAICode: "insufficient_quota", class: classify.SpendCap}},
		{"openai overload 503", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultOverload, RetryAfter: time.Second}))
			return f.acts, chat(OpenAI, "gpt-4o", "hi")
		}, failure{status: 503, retryAfter: "1", openAICode: "server_error", class: classify.Overloaded}},
		{"openai 401", func(t *testing.T, f *simFixture) (*Activities, Request) {
			return newActs(t, f.srv, "sk-wrong"), chat(OpenAI, "gpt-4o", "hi")
		}, failure{status: 401, openAICode: "invalid_api_key", class: classify.Auth}},
		{"openai 400 context too long", func(t *testing.T, f *simFixture) (*Activities, Request) {
			return f.acts, chat(OpenAI, "gpt-4o", strings.Repeat("x", 4000))
		}, failure{status: 400, openAICode: "context_length_exceeded", class: classify.ContextTooLong}},
		{"openai injected 500", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultServerError, Times: 1}))
			return f.acts, chat(OpenAI, "gpt-4o", "hi")
		}, failure{status: 500, openAICode: "server_error", class: classify.Transient}},
		{"openai 404 unknown model", func(t *testing.T, f *simFixture) (*Activities, Request) {
			return f.acts, chat(OpenAI, "gpt-unknown", "hi")
		}, failure{status: 404, openAICode: "model_not_found", class: classify.NotFound}},
		{"openai 400 invalid request", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultInvalidRequest, Times: 1}))
			return f.acts, chat(OpenAI, "gpt-4o", "hi")
		}, failure{status: 400, openAICode: "invalid_request_error", class: classify.BadRequest}},
		{"anthropic injected 429 with retry-after 2", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Times: 1, RetryAfter: 2 * time.Second}))
			return f.acts, chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 429, retryAfter: "2", anthropic: "rate_limit_error", class: classify.RateLimited}},
		{"anthropic bucket 429", func(t *testing.T, f *simFixture) (*Activities, Request) {
			_, err := f.acts.Complete(context.Background(), chat(Anthropic, "claude-tiny", "hi"))
			require.NoError(t, err)
			return f.acts, chat(Anthropic, "claude-tiny", "hi")
		}, failure{status: 429, retryAfter: "60", anthropic: "rate_limit_error", class: classify.RateLimited}},
		{"anthropic spend cap", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultSpendCap}))
			return f.acts, chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 429, anthropic: "rate_limit_error", errorCode: "enforced_spend_limit_reached", class: classify.SpendCap}},
		{"anthropic overload 529", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultOverload}))
			return f.acts, chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 529, anthropic: "overloaded_error", class: classify.Overloaded}},
		{"anthropic overload 503", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultOverload, Status: 503}))
			return f.acts, chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 503, anthropic: "overloaded_error", class: classify.Overloaded}},
		{"anthropic 401", func(t *testing.T, f *simFixture) (*Activities, Request) {
			return newActs(t, f.srv, "sk-wrong"), chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 401, anthropic: "authentication_error", class: classify.Auth}},
		{"anthropic 400 context too long", func(t *testing.T, f *simFixture) (*Activities, Request) {
			return f.acts, chat(Anthropic, "claude-haiku-4-5", strings.Repeat("x", 4000))
		}, failure{status: 400, anthropic: "invalid_request_error", class: classify.ContextTooLong}},
		{"anthropic injected 500", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultServerError, Times: 1}))
			return f.acts, chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 500, anthropic: "api_error", class: classify.Transient}},
		{"anthropic 404 unknown model", func(t *testing.T, f *simFixture) (*Activities, Request) {
			return f.acts, chat(Anthropic, "claude-unknown", "hi")
		}, failure{status: 404, anthropic: "not_found_error", class: classify.NotFound}},
		{"anthropic 400 invalid request", func(t *testing.T, f *simFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultInvalidRequest, Times: 1}))
			return f.acts, chat(Anthropic, "claude-haiku-4-5", "hi")
		}, failure{status: 400, anthropic: "invalid_request_error", class: classify.BadRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSimFixture(t)
			acts, req := tc.setup(t, f)
			rec := &classify.Recorder{}
			_, err := acts.Complete(classify.NewContext(context.Background(), rec), req)
			require.Error(t, err)

			var status int
			var header http.Header
			switch req.Provider {
			case OpenAI:
				var oe *openai.Error
				require.ErrorAs(t, err, &oe)
				status, header = oe.StatusCode, oe.Response.Header
				code := oe.Code
				if code == "" {
					code = oe.Type
				}
				require.Equal(t, tc.want.openAICode, code)
			case Anthropic:
				var ae *anthropic.Error
				require.ErrorAs(t, err, &ae)
				status, header = ae.StatusCode, ae.Response.Header
				require.Equal(t, tc.want.anthropic, string(ae.Type()))
				require.Equal(t, tc.want.errorCode, string(ae.ErrorCode()))
				require.NotEmpty(t, ae.RequestID)
			}
			require.Equal(t, tc.want.status, status)
			require.Equal(t, tc.want.retryAfter, header.Get("retry-after"))

			v := classify.Classifier{}.Error(err, f.clock.Now())
			require.Equal(t, tc.want.class, v.Class, "classified as %s", v.Class)
			require.Equal(t, tc.want.status, v.Status)
			require.Equal(t, tc.want.retryAfter != "", v.HasRetryAfter)
			if tc.want.retryAfter != "" {
				require.Equal(t, tc.want.retryAfter, strconv.Itoa(int(v.RetryAfter/time.Second)))
			}
			switch tc.want.class {
			case classify.SpendCap, classify.NotFound, classify.BadRequest, classify.ContextTooLong, classify.Auth:
				require.False(t, v.Retryable, "retrying the same request cannot succeed")
			case classify.Transient:
				require.True(t, v.Retryable, "a 5xx may not recur")
			}

			recStatus, _, ok := rec.Last()
			require.True(t, ok, "failures are recorded too")
			require.Equal(t, tc.want.status, recStatus)

			var appErr *temporal.ApplicationError
			require.False(t, errors.As(err, &appErr), "provider errors are left for the interceptor to classify")
		})
	}
}

// TestCompleteConnectionRefusedIsTransient points both SDKs at a port
// nothing listens on: no answer to record, an error left for the
// interceptor, classified Transient.
func TestCompleteConnectionRefusedIsTransient(t *testing.T) {
	addr := testnet.FreeAddr(t)
	acts, err := New(Config{
		OpenAI:    ProviderConfig{APIKey: testKey, BaseURL: "http://" + addr + "/v1/"},
		Anthropic: ProviderConfig{APIKey: testKey, BaseURL: "http://" + addr},
	})
	require.NoError(t, err)
	for _, req := range []Request{chat(OpenAI, "gpt-4o", "hi"), chat(Anthropic, "claude-haiku-4-5", "hi")} {
		t.Run(req.Provider, func(t *testing.T) {
			rec := &classify.Recorder{}
			_, err := acts.Complete(classify.NewContext(context.Background(), rec), req)
			require.Error(t, err)
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			var appErr *temporal.ApplicationError
			require.False(t, errors.As(err, &appErr), "transport failures are left for the interceptor to classify")

			v := classify.Classifier{}.Error(err, testNow)
			require.Equal(t, classify.Transient, v.Class)
			require.True(t, v.Retryable)
			require.Equal(t, "connection refused", v.Reason)
			require.Zero(t, rec.Count(), "no answer to record")
		})
	}
}

func TestCompleteRefusesBadInput(t *testing.T) {
	f := newSimFixture(t)
	onlyOpenAI, err := New(Config{OpenAI: ProviderConfig{APIKey: testKey, BaseURL: f.srv.URL + "/v1/"}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		acts    *Activities
		req     Request
		errType string
		field   string
	}{
		{"invalid request", f.acts, Request{Provider: OpenAI, Model: "gpt-4o", MaxOutputTokens: 10}, tollgate.InvalidRequest, "request.messages"},
		{"unknown provider", f.acts, Request{Provider: "mistral", Model: "x", Messages: []Message{{Role: RoleUser, Content: "x"}}, MaxOutputTokens: 1}, tollgate.InvalidRequest, "request.provider"},
		{"provider not configured", onlyOpenAI, chat(Anthropic, "claude-haiku-4-5", "hi"), tollgate.ProviderNotConfigured, "request.provider"},
		{"gemini not configured", f.acts, chat(Gemini, "gemini-2.5-flash", "hi"), tollgate.ProviderNotConfigured, "request.provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.acts.Complete(context.Background(), tc.req)
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.True(t, appErr.NonRetryable())
			require.Equal(t, tc.errType, appErr.Type())
			var ie *InvalidRequestError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
		})
	}
	require.Zero(t, f.sim.Stats("").Received, "nothing reached the provider")
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"nothing configured", Config{}, "config"},
		{"openai without key", Config{OpenAI: ProviderConfig{BaseURL: "http://127.0.0.1:1/v1/"}}, "config.openai.api_key"},
		{"anthropic relative url", Config{Anthropic: ProviderConfig{APIKey: "k", BaseURL: "localhost"}}, "config.anthropic.base_url"},
		{"negative timeout", Config{Anthropic: ProviderConfig{APIKey: "k", Timeout: -time.Second}}, "config.anthropic.timeout"},
		{"account of no provider", Config{Accounts: []AccountConfig{{Provider: "azure", Account: "east", Config: ProviderConfig{APIKey: "k"}}}}, "config.accounts[0].provider"},
		{"account unnamed", Config{Accounts: []AccountConfig{{Provider: OpenAI, Config: ProviderConfig{APIKey: "k"}}}}, "config.accounts[0].account"},
		{"account twice", Config{Accounts: []AccountConfig{
			{Provider: OpenAI, Account: "east", Config: ProviderConfig{APIKey: "k"}},
			{Provider: OpenAI, Account: "east", Config: ProviderConfig{APIKey: "k2"}}}}, "config.accounts[1].account"},
		{"account without key", Config{Accounts: []AccountConfig{{Provider: Anthropic, Account: "w1", Config: ProviderConfig{BaseURL: "http://127.0.0.1:1"}}}}, "config.accounts[0].api_key"},
		{"account bad url", Config{Accounts: []AccountConfig{{Provider: OpenAI, Account: "east", Config: ProviderConfig{APIKey: "k", BaseURL: "east"}}}}, "config.accounts[0].base_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			var ie *InvalidRequestError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
		})
	}
	t.Run("the caller's client is not modified", func(t *testing.T) {
		c := &http.Client{Timeout: time.Second}
		_, err := New(Config{OpenAI: ProviderConfig{APIKey: "k", HTTPClient: c}})
		require.NoError(t, err)
		require.Nil(t, c.Transport)
	})
}

// A request naming an account of Config.Accounts is sent with that
// account's key to its endpoint; one naming any other account with its
// provider's.
func TestCompleteUsesTheAccountsKeyAndEndpoint(t *testing.T) {
	sims := make([]*llmsim.Sim, 2)
	urls := make([]string, 2)
	for i := range sims {
		sim, err := llmsim.New(llmsim.Config{
			Models:   []llmsim.Model{{Provider: llmsim.OpenAI, Name: "gpt-4o"}, {Provider: llmsim.Anthropic, Name: "claude-3-5-haiku-latest"}},
			Accounts: []llmsim.Account{{Name: "main", APIKey: "k-main"}, {Name: "east", APIKey: "k-east"}},
		})
		require.NoError(t, err)
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		sims[i], urls[i] = sim, srv.URL
	}
	acts, err := New(Config{
		OpenAI:    ProviderConfig{APIKey: "k-main", BaseURL: urls[0] + "/v1/"},
		Anthropic: ProviderConfig{APIKey: "k-main", BaseURL: urls[0]},
		Accounts: []AccountConfig{
			{Provider: OpenAI, Account: "east", Config: ProviderConfig{APIKey: "k-east", BaseURL: urls[1] + "/v1/"}},
			{Provider: Anthropic, Account: "east", Config: ProviderConfig{APIKey: "k-east", BaseURL: urls[1]}},
		},
	})
	require.NoError(t, err)
	ctx := context.Background()
	for _, c := range []struct{ provider, model string }{{OpenAI, "gpt-4o"}, {Anthropic, "claude-3-5-haiku-latest"}} {
		req := chat(c.provider, c.model, "Say hi.")
		req.Account = "east"
		_, err := acts.Complete(ctx, req)
		require.NoError(t, err)
		req.Account = "west" // not listed: the provider's own config
		_, err = acts.Complete(ctx, req)
		require.NoError(t, err)
	}
	require.Zero(t, sims[0].Spent("east"))
	require.Positive(t, sims[0].Spent("main"), "accounts not listed go to the provider's endpoint with its key")
	require.Zero(t, sims[1].Spent("main"))
	require.Positive(t, sims[1].Spent("east"), "the east account's calls go to its endpoint with its key")
	require.EqualValues(t, 2, sims[1].Stats("gpt-4o").Accepted+sims[1].Stats("claude-3-5-haiku-latest").Accepted)
}
