package activities

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/genai"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// geminiTestKey looks like a Gemini API key, so that a leak is easy to spot.
const geminiTestKey = "AIzaSy-tollgate-test-3e9c1f"

// geminiFixture is llmsim serving Gemini models on a manual clock set to
// Saturday 7 March 2026, 23:30 in Los Angeles (PST): the next midnight there
// is the last before daylight saving starts.
type geminiFixture struct {
	sim   *llmsim.Sim
	srv   *httptest.Server
	clock *llmsim.ManualClock
	acts  *Activities
}

var geminiNow = time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC)

func newGeminiFixture(t *testing.T) *geminiFixture {
	t.Helper()
	clock := llmsim.NewManualClock(geminiNow)
	sim, err := llmsim.New(llmsim.Config{
		Models: []llmsim.Model{
			{Provider: llmsim.Gemini, Name: "gemini-2.5-flash", RequestsPerMinute: 10, TokensPerMinute: 250_000, ContextWindow: 1000},
			{Provider: llmsim.Gemini, Name: "gemini-rpm1", RequestsPerMinute: 1},
			{Provider: llmsim.Gemini, Name: "gemini-rpd1", RequestsPerDay: 1},
		},
		Accounts: []llmsim.Account{{Name: "acct", APIKey: geminiTestKey}, {Name: "prepaid", APIKey: geminiTestKey + "-prepaid", SpendCapTokens: 1}},
	}, llmsim.WithClock(clock))
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &geminiFixture{sim: sim, srv: srv, clock: clock, acts: newGeminiActs(t, srv.URL, geminiTestKey)}
}

func newGeminiActs(t *testing.T, baseURL, key string) *Activities {
	t.Helper()
	acts, err := New(Config{Gemini: ProviderConfig{APIKey: key, BaseURL: baseURL, Timeout: 10 * time.Second}})
	require.NoError(t, err)
	return acts
}

func TestGeminiCompleteSuccess(t *testing.T) {
	f := newGeminiFixture(t)
	temp := 1.5 // Gemini accepts up to 2
	req := chat(Gemini, "gemini-2.5-flash", "What is a token bucket?")
	req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: "A rate limiter."}, Message{Role: RoleUser, Content: "And a daily quota?"})
	req.Temperature = &temp

	rec := &classify.Recorder{}
	resp, err := f.acts.Complete(classify.NewContext(context.Background(), rec), req)
	require.NoError(t, err)
	require.Contains(t, resp.Text, "And a daily quota?", "the reply answers the last user turn")
	require.Equal(t, "STOP", resp.FinishReason)
	require.Equal(t, Gemini, resp.Provider)
	require.Equal(t, "gemini-2.5-flash", resp.Model)
	require.NotEmpty(t, resp.RequestID, "Gemini's responseId")
	require.Equal(t, EstimateTokens(req.Characters()), resp.Usage.InputTokens, "the system instruction and every turn count")
	require.Positive(t, resp.Usage.OutputTokens)
	require.LessOrEqual(t, resp.Usage.OutputTokens, req.MaxOutputTokens)
	require.Equal(t, resp.Usage.InputTokens, resp.RateLimitTokens, "Gemini's TPM counts input tokens")
	require.Equal(t, quota.Cost{Requests: 1, Tokens: resp.Usage.InputTokens, InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens},
		resp.QuotaUsage(), "usageMetadata is what the call settles")

	status, _, ok := rec.Last()
	require.True(t, ok, "the interceptor's recorder saw the answer")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 1, rec.Count())

	req = chat(Gemini, "gemini-2.5-flash", strings.Repeat("long ", 100))
	req.MaxOutputTokens = 5
	resp, err = f.acts.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "MAX_TOKENS", resp.FinishReason)
	require.EqualValues(t, 5, resp.Usage.OutputTokens)
}

func TestGeminiCompleteErrorsAreSDKErrors(t *testing.T) {
	midnightPT := time.Date(2026, 3, 8, 8, 0, 0, 0, time.UTC) // 00:00 PST, Sunday
	for _, tc := range []struct {
		name       string
		setup      func(t *testing.T, f *geminiFixture) (*Activities, Request)
		status     int
		rpcStatus  string
		class      classify.Class
		retryAfter time.Duration // from RetryInfo; 0: none
		resetAt    time.Time
	}{
		{"per-minute quota", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			_, err := f.acts.Complete(context.Background(), chat(Gemini, "gemini-rpm1", "hi"))
			require.NoError(t, err)
			return f.acts, chat(Gemini, "gemini-rpm1", "hi")
		}, 429, "RESOURCE_EXHAUSTED", classify.RateLimited, time.Minute, time.Time{}},
		{"per-day quota", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			_, err := f.acts.Complete(context.Background(), chat(Gemini, "gemini-rpd1", "hi"))
			require.NoError(t, err)
			return f.acts, chat(Gemini, "gemini-rpd1", "hi")
		}, 429, "RESOURCE_EXHAUSTED", classify.DailyQuota, 22 * time.Second, midnightPT},
		{"prepaid balance spent", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			acts := newGeminiActs(t, f.srv.URL, geminiTestKey+"-prepaid")
			_, err := acts.Complete(context.Background(), chat(Gemini, "gemini-2.5-flash", "hi"))
			require.NoError(t, err)
			return acts, chat(Gemini, "gemini-2.5-flash", "hi")
		}, 429, "RESOURCE_EXHAUSTED", classify.SpendCap, 0, time.Time{}},
		{"injected rate limit", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Provider: llmsim.Gemini, Times: 1, RetryAfter: 1500 * time.Millisecond}))
			return f.acts, chat(Gemini, "gemini-2.5-flash", "hi")
		}, 429, "RESOURCE_EXHAUSTED", classify.RateLimited, 1500 * time.Millisecond, time.Time{}},
		{"overloaded", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultOverload, Times: 1}))
			return f.acts, chat(Gemini, "gemini-2.5-flash", "hi")
		}, 503, "UNAVAILABLE", classify.Overloaded, 0, time.Time{}},
		{"wrong key", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			return newGeminiActs(t, f.srv.URL, "AIzaSy-wrong"), chat(Gemini, "gemini-2.5-flash", "hi")
		}, 400, "INVALID_ARGUMENT", classify.Auth, 0, time.Time{}},
		{"unknown model", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			return f.acts, chat(Gemini, "gemini-unknown", "hi")
		}, 404, "NOT_FOUND", classify.NotFound, 0, time.Time{}},
		{"context too long", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			return f.acts, chat(Gemini, "gemini-2.5-flash", strings.Repeat("x", 4000))
		}, 400, "INVALID_ARGUMENT", classify.ContextTooLong, 0, time.Time{}},
		{"server error", func(t *testing.T, f *geminiFixture) (*Activities, Request) {
			require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultServerError, Times: 1}))
			return f.acts, chat(Gemini, "gemini-2.5-flash", "hi")
		}, 500, "INTERNAL", classify.Transient, 0, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newGeminiFixture(t)
			acts, req := tc.setup(t, f)
			rec := &classify.Recorder{}
			_, err := acts.Complete(classify.NewContext(context.Background(), rec), req)
			require.Error(t, err)

			var apiErr genai.APIError
			require.ErrorAs(t, err, &apiErr, "the SDK's own error, for the interceptor")
			require.Equal(t, tc.status, apiErr.Code)
			require.Equal(t, tc.rpcStatus, apiErr.Status)
			var appErr *temporal.ApplicationError
			require.False(t, errors.As(err, &appErr), "provider errors are left for the interceptor to classify")

			v := classify.Classifier{}.Error(err, f.clock.Now())
			require.Equal(t, tc.class, v.Class, "classified as %s (%s)", v.Class, v.Reason)
			require.Equal(t, tc.status, v.Status)
			require.Equal(t, tc.retryAfter != 0, v.HasRetryAfter)
			require.Equal(t, tc.retryAfter, v.RetryAfter)
			require.Equal(t, tc.resetAt, v.ResetAt)

			status, h, ok := rec.Last()
			require.True(t, ok, "failures are recorded too")
			require.Equal(t, tc.status, status)
			require.Empty(t, h.Get("retry-after"), "Gemini's delay is in the body")
			require.Equal(t, 1, rec.Count(), "the SDK's retries are off")
		})
	}
}

// Transport failures have no answer to record and are transient; 2xx answers
// that hold nothing are MalformedResponse; a blocked prompt is an answer.
func TestGeminiCompleteOddAnswers(t *testing.T) {
	answer := func(status int, body string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	req := chat(Gemini, "gemini-2.5-flash", "hi")

	t.Run("connection refused", func(t *testing.T) {
		srv := answer(200, "{}")
		srv.Close()
		rec := &classify.Recorder{}
		_, err := newGeminiActs(t, srv.URL, geminiTestKey).Complete(classify.NewContext(context.Background(), rec), req)
		require.Equal(t, classify.Transient, classify.Error(err, testNow).Class)
		require.Zero(t, rec.Count())
		require.NotContains(t, err.Error(), geminiTestKey)
	})
	t.Run("not JSON", func(t *testing.T) {
		_, err := newGeminiActs(t, answer(200, "<html>hello</html>").URL, geminiTestKey).Complete(context.Background(), req)
		requireMalformed(t, err, "gemini generate content (model gemini-2.5-flash)", "HTTP 200 answer could not be read", "config.gemini.base_url")
	})
	t.Run("no candidates", func(t *testing.T) {
		_, err := newGeminiActs(t, answer(200, `{"usageMetadata":{"promptTokenCount":3}}`).URL, geminiTestKey).Complete(context.Background(), req)
		requireMalformed(t, err, "holds no candidates and no block reason", "request id none")
	})
	t.Run("blocked prompt", func(t *testing.T) {
		srv := answer(200, `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3},"responseId":"r-1"}`)
		resp, err := newGeminiActs(t, srv.URL, geminiTestKey).Complete(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "PROHIBITED_CONTENT", resp.FinishReason)
		require.Empty(t, resp.Text)
		require.EqualValues(t, 3, resp.Usage.InputTokens)
		require.Equal(t, "r-1", resp.RequestID)
	})
}

// setGeminiEnv sets every environment variable the Gemini SDK reads, with
// values that must never reach the wire.
func setGeminiEnv(t *testing.T, decoy string) {
	t.Helper()
	for k, v := range map[string]string{
		"GEMINI_API_KEY":              "AIza-from-env-gemini",
		"GOOGLE_API_KEY":              "AIza-from-env-google",
		"GOOGLE_GEMINI_BASE_URL":      decoy,
		"GOOGLE_VERTEX_BASE_URL":      decoy,
		"GOOGLE_GENAI_USE_VERTEXAI":   "true",
		"GOOGLE_GENAI_USE_ENTERPRISE": "true",
		"GOOGLE_CLOUD_PROJECT":        "project-from-env",
		"GOOGLE_CLOUD_LOCATION":       "us-central1",
	} {
		t.Setenv(k, v)
	}
}

func TestGeminiClientIgnoresTheEnvironment(t *testing.T) {
	sim, err := llmsim.New(llmsim.Config{
		Models:   []llmsim.Model{{Provider: llmsim.Gemini, Name: "gemini-2.5-flash"}},
		Accounts: []llmsim.Account{{Name: "acct", APIKey: geminiTestKey}},
	})
	require.NoError(t, err)
	headers, decoyHits := &headerLog{}, &headerLog{}
	srv := httptest.NewServer(headers.wrap(sim))
	t.Cleanup(srv.Close)
	decoy := httptest.NewServer(decoyHits.wrap(http.NotFoundHandler()))
	t.Cleanup(decoy.Close)
	setGeminiEnv(t, decoy.URL)

	_, err = newGeminiActs(t, srv.URL, geminiTestKey).Complete(context.Background(), chat(Gemini, "gemini-2.5-flash", "hi"))
	require.NoError(t, err, "the config's key reached the configured server, on the Gemini API backend")
	require.Empty(t, decoyHits.all())
	seen := headers.all()
	require.Len(t, seen, 1)
	require.Equal(t, geminiTestKey, seen[0].Get("X-Goog-Api-Key"))
	for name, values := range seen[0] {
		for _, v := range values {
			require.NotContains(t, v, "from-env", "header %s", name)
		}
	}
}

// The key reaches neither the activity's input, its result, its errors nor
// the debug log, on success and on failure.
func TestGeminiAPIKeyNeverInInputOrLogs(t *testing.T) {
	f := newGeminiFixture(t)
	require.NoError(t, f.sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Provider: llmsim.Gemini, Times: 1, RetryAfter: time.Second}))
	var logs syncbuf.Buffer
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	Register(env, f.acts)
	const wrongKey = "AIzaSy-wrong-key-5d6e7f"
	wrongEnv := suite.NewTestActivityEnvironment()
	Register(wrongEnv, newGeminiActs(t, f.srv.URL, wrongKey))

	var outputs []string
	run := func(env *testsuite.TestActivityEnvironment, req Request) {
		in, err := json.Marshal(req)
		require.NoError(t, err)
		outputs = append(outputs, string(in))
		val, err := env.ExecuteActivity(CompleteActivity, req)
		if err != nil {
			outputs = append(outputs, err.Error())
			return
		}
		var resp Response
		require.NoError(t, val.Get(&resp))
		out, err := json.Marshal(resp)
		require.NoError(t, err)
		outputs = append(outputs, string(out))
	}
	run(env, chat(Gemini, "gemini-2.5-flash", "hello"))      // 429
	run(env, chat(Gemini, "gemini-2.5-flash", "hello"))      // success
	run(wrongEnv, chat(Gemini, "gemini-2.5-flash", "hello")) // 400 API_KEY_INVALID

	st := f.sim.Stats("gemini-2.5-flash")
	require.EqualValues(t, 1, st.Accepted)
	require.EqualValues(t, 1, st.TooManyRequests)
	require.Contains(t, logs.String(), "LLM call done")
	require.Contains(t, logs.String(), "LLM call failed")
	all := strings.Join(outputs, "\n") + "\n" + logs.String()
	for _, key := range []string{geminiTestKey, wrongKey} {
		require.NotContains(t, all, key)
		require.NotContains(t, all, key[len(key)-6:], "not even the key's tail")
	}
	require.NotContains(t, logs.String(), "hello", "prompts are not logged")
}

func TestGeminiRequestCharge(t *testing.T) {
	require.Equal(t, quota.Cost{Requests: 1, Tokens: 3, InputTokens: 3}, EstimateGemini(10, 100),
		"tokens per minute count the prompt alone; Gemini meters no output per minute")
	require.Equal(t, quota.Cost{Requests: 1, Tokens: 5, InputTokens: 5}, quota.Calibrate(EstimateGemini(10, 100), 3, 1.5),
		"a learned ratio scales the prompt, and nothing lifts Tokens to max_tokens")

	req := chat(Gemini, "gemini-2.5-flash", "Summarise this.") // 14 + 15 characters
	c, err := req.QuotaCharge()
	require.NoError(t, err)
	require.Equal(t, quota.Key{Provider: Gemini, Account: "acct", Model: "gemini-2.5-flash"}, c.Key)
	require.Equal(t, EstimateGemini(req.Characters(), 100), c.Cost)
	require.Equal(t, EstimateTokens(req.Characters()), c.Prompt, "the prompt's estimate, for the store to calibrate")

	two := 2.0
	req.Temperature = &two
	require.NoError(t, req.Validate(), "Gemini accepts temperatures up to 2")
	req.MaxOutputTokens = math.MaxInt32 + 1
	var ie *InvalidRequestError
	require.ErrorAs(t, req.Validate(), &ie)
	require.Equal(t, "request.max_output_tokens", ie.Field)

	moved, err := chat(Gemini, "gemini-2.5-flash", "hi").Retarget(tollgate.Target{Provider: OpenAI, Model: "gpt-4o"})
	require.NoError(t, err)
	require.Equal(t, OpenAI, moved.(Request).Provider)
	back, err := chat(OpenAI, "gpt-4o", "hi").Retarget(tollgate.Target{Provider: Gemini, Model: "gemini-2.5-flash"})
	require.NoError(t, err)
	require.Equal(t, Gemini, back.(Request).Provider)

	_, err = New(Config{Gemini: ProviderConfig{APIKey: geminiTestKey, Organization: "org-1"}})
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "config.gemini.organization", ie.Field)
	_, err = New(Config{Gemini: ProviderConfig{BaseURL: "http://127.0.0.1:1"}})
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "config.gemini.api_key", ie.Field)
}
