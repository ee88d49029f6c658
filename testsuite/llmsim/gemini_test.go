package llmsim

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

// gemini sends a generateContent call for model with prompt and
// maxOutputTokens (0: none), as the SDKs do.
func (f *fixture) gemini(t *testing.T, key, model, prompt string, maxTokens int64) reply {
	t.Helper()
	body := map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}}}
	if maxTokens > 0 {
		body["generationConfig"] = map[string]any{"maxOutputTokens": maxTokens}
	}
	return f.post(t, "/v1beta/models/"+model+":generateContent", map[string]string{"x-goog-api-key": key}, body)
}

// rpcDetail returns the first google.rpc detail of @type kind in r's error.
func (r reply) rpcDetail(kind string) map[string]any {
	e, _ := r.body["error"].(map[string]any)
	details, _ := e["details"].([]any)
	for _, d := range details {
		m, _ := d.(map[string]any)
		if m["@type"] == "type.googleapis.com/google.rpc."+kind {
			return m
		}
	}
	return nil
}

// quotaID is the quotaId of r's first QuotaFailure violation.
func (r reply) quotaID() string {
	qf := r.rpcDetail("QuotaFailure")
	if qf == nil {
		return ""
	}
	v, _ := qf["violations"].([]any)
	if len(v) == 0 {
		return ""
	}
	id, _ := v[0].(map[string]any)["quotaId"].(string)
	return id
}

func TestGeminiSuccessBody(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: Gemini, Name: "gemini-2.5-flash"}}})
	r := f.gemini(t, "k", "gemini-2.5-flash", "Explain token buckets.", 0) // 22 characters
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, r.str("modelVersion"), "gemini-2.5-flash")
	require.NotEmpty(t, r.str("responseId"))
	c := r.body["candidates"].([]any)[0].(map[string]any)
	require.Equal(t, "STOP", c["finishReason"])
	require.Equal(t, "model", c["content"].(map[string]any)["role"])
	u := r.body["usageMetadata"].(map[string]any)
	require.EqualValues(t, 6, u["promptTokenCount"], "ceil(22/4)")
	require.EqualValues(t, u["promptTokenCount"].(float64)+u["candidatesTokenCount"].(float64), u["totalTokenCount"])
	for k := range r.header {
		require.NotContains(t, strings.ToLower(k), "ratelimit", "Gemini reports no limits in headers")
	}

	r = f.gemini(t, "k", "gemini-2.5-flash", strings.Repeat("long ", 40), 3)
	c = r.body["candidates"].([]any)[0].(map[string]any)
	require.Equal(t, "MAX_TOKENS", c["finishReason"])
	require.EqualValues(t, 3, r.body["usageMetadata"].(map[string]any)["candidatesTokenCount"])
}

// A per-minute refusal is RESOURCE_EXHAUSTED naming a PerMinute quota, with
// the wait in RetryInfo and no Retry-After header.
func TestGeminiPerMinuteRefusal(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: Gemini, Name: "g", RequestsPerMinute: 2, TokensPerMinute: 100}}})
	require.Equal(t, http.StatusOK, f.gemini(t, "k", "g", "x", 1).status)
	require.Equal(t, http.StatusOK, f.gemini(t, "k", "g", "x", 1).status)
	r := f.gemini(t, "k", "g", "x", 1)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "RESOURCE_EXHAUSTED", r.str("error.status"))
	require.Equal(t, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", r.quotaID())
	require.Equal(t, "30s", r.rpcDetail("RetryInfo")["retryDelay"], "2 RPM earns a request every 30 s")
	require.Contains(t, r.str("error.message"), "Please retry in 30s.")
	require.Empty(t, r.header.Get("retry-after"))
	require.Empty(t, r.header.Get("retry-after-ms"))

	// Tokens per minute count the prompt alone: max_tokens is free.
	f.clock.Advance(time.Minute)
	prompt := strings.Repeat("y", 240) // 60 tokens
	require.Equal(t, http.StatusOK, f.gemini(t, "k", "g", prompt, 5000).status)
	r = f.gemini(t, "k", "g", prompt, 1)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "GenerateContentInputTokensPerModelPerMinute-FreeTier", r.quotaID())
	require.Equal(t, "12s", r.rpcDetail("RetryInfo")["retryDelay"], "20 tokens short at 100 a minute")
}

// The per-day window closes at midnight America/Los_Angeles, 23 hours after
// the previous one on the day daylight saving starts.
func TestGeminiRequestsPerDayResetAtMidnightPacific(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: Gemini, Name: "g", RequestsPerDay: 1}}})
	clock := f.clock
	clock.Advance(time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC).Sub(epoch)) // Sat 7 Mar 23:30 PST

	require.Equal(t, http.StatusOK, f.gemini(t, "k", "g", "x", 1).status)
	r := f.gemini(t, "k", "g", "x", 1)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", r.quotaID())
	require.Equal(t, "22s", r.rpcDetail("RetryInfo")["retryDelay"], "Gemini's per-day answer carries a short delay too")
	require.Empty(t, r.header.Get("retry-after"))

	clock.Advance(29*time.Minute + 59*time.Second) // 23:59:59 PST
	require.Equal(t, http.StatusTooManyRequests, f.gemini(t, "k", "g", "x", 1).status)
	clock.Advance(time.Second) // Sun 8 Mar 00:00 PST = 08:00 UTC
	require.Equal(t, http.StatusOK, f.gemini(t, "k", "g", "x", 1).status)
	require.Equal(t, http.StatusTooManyRequests, f.gemini(t, "k", "g", "x", 1).status)

	// Clocks spring forward at 02:00: Monday starts at 07:00 UTC, 23 hours on.
	clock.Advance(23*time.Hour - time.Second)
	require.Equal(t, http.StatusTooManyRequests, f.gemini(t, "k", "g", "x", 1).status)
	clock.Advance(time.Second)
	require.Equal(t, http.StatusOK, f.gemini(t, "k", "g", "x", 1).status)

	// OpenAI's day still ends at midnight UTC (TestRequestsPerDay).
	require.Equal(t, time.UTC, dayZone(OpenAI))
}

func TestGeminiErrors(t *testing.T) {
	f := newFixture(t, Config{
		Models:   []Model{{Provider: Gemini, Name: "g", ContextWindow: 100, RequestsPerMinute: 1000}},
		Accounts: []Account{{Name: "a", APIKey: "k-good"}, {Name: "capped", APIKey: "k-capped", SpendCapTokens: 1}},
	})
	long := strings.Repeat("y", 400) // 100 tokens
	require.Equal(t, http.StatusOK, f.gemini(t, "k-capped", "g", "spend it", 1).status)
	for _, tc := range []struct {
		name           string
		send           func(t *testing.T) reply
		status         int
		rpcStatus      string
		messageContain string
	}{
		{"spend cap", func(t *testing.T) reply { return f.gemini(t, "k-capped", "g", "hi", 1) }, 429, "RESOURCE_EXHAUSTED", "prepayment credits are depleted"},
		{"wrong key", func(t *testing.T) reply { return f.gemini(t, "k-bad", "g", "hi", 1) }, 400, "INVALID_ARGUMENT", "API key not valid"},
		{"missing key", func(t *testing.T) reply { return f.gemini(t, "", "g", "hi", 1) }, 403, "PERMISSION_DENIED", "unregistered callers"},
		{"unknown model", func(t *testing.T) reply { return f.gemini(t, "k-good", "g-9", "hi", 1) }, 404, "NOT_FOUND", "models/g-9 is not found"},
		{"context too long", func(t *testing.T) reply { return f.gemini(t, "k-good", "g", long, 10) }, 400, "INVALID_ARGUMENT", "exceeds the maximum number of tokens"},
		{"no contents", func(t *testing.T) reply {
			return f.post(t, "/v1beta/models/g:generateContent", map[string]string{"x-goog-api-key": "k-good"}, map[string]any{})
		}, 400, "INVALID_ARGUMENT", "contents is not specified"},
		{"bad role", func(t *testing.T) reply {
			return f.post(t, "/v1beta/models/g:generateContent", map[string]string{"x-goog-api-key": "k-good"},
				map[string]any{"contents": []any{map[string]any{"role": "assistant", "parts": []any{map[string]any{"text": "hi"}}}}})
		}, 400, "INVALID_ARGUMENT", "valid role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.send(t)
			require.Equal(t, tc.status, r.status)
			require.Equal(t, float64(tc.status), r.body["error"].(map[string]any)["code"])
			require.Equal(t, tc.rpcStatus, r.str("error.status"))
			require.Contains(t, r.str("error.message"), tc.messageContain)
			require.NotContains(t, r.str("error.message"), "k-bad", "errors never echo the key")
			require.Nil(t, r.rpcDetail("RetryInfo"))
		})
	}
	require.EqualValues(t, 1, f.sim.Stats("g").SpendCapped)

	t.Run("faults", func(t *testing.T) {
		require.NoError(t, f.sim.Inject(
			Fault{Kind: FaultOverload, Provider: Gemini, Times: 1},
			Fault{Kind: FaultServerError, Provider: Gemini, Times: 1},
			Fault{Kind: FaultRateLimit, Provider: Gemini, Times: 1, RetryAfter: 1500 * time.Millisecond},
		))
		r := f.gemini(t, "k-good", "g", "hi", 1)
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		require.Equal(t, "UNAVAILABLE", r.str("error.status"))
		r = f.gemini(t, "k-good", "g", "hi", 1)
		require.Equal(t, http.StatusInternalServerError, r.status)
		require.Equal(t, "INTERNAL", r.str("error.status"))
		r = f.gemini(t, "k-good", "g", "hi", 1)
		require.Equal(t, http.StatusTooManyRequests, r.status)
		require.Equal(t, "1.5s", r.rpcDetail("RetryInfo")["retryDelay"])
		require.Equal(t, geminiQuotas[axisRequests].id, r.quotaID(), "a fault's rate limit names the per-minute requests quota")
		require.Contains(t, r.str("error.message"), "limit: 1000,")
		require.Empty(t, r.header.Get("retry-after"))
	})
}

func TestGeminiRoutes(t *testing.T) {
	for path, want := range map[string]string{
		"/v1beta/models/gemini-2.5-flash:generateContent": "gemini-2.5-flash",
		"/v1beta/models/g:streamGenerateContent":          "",
		"/v1beta/models/:generateContent":                 "",
		"/v1beta/models/a/b:generateContent":              "",
		"/v1/models/g:generateContent":                    "",
	} {
		d, ok := geminiRoute(path)
		require.Equal(t, want != "", ok, path)
		require.Equal(t, want, d.model, path)
	}
}

// The official SDK, pointed at Sim, gets an answer and reads Sim's errors as
// its own APIError.
func TestGeminiThroughTheSDK(t *testing.T) {
	f := newFixture(t, Config{Models: []Model{{Provider: Gemini, Name: "gemini-2.5-flash", RequestsPerMinute: 1}}})
	attempts := int32(1)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "k", Backend: genai.BackendGeminiAPI, HTTPClient: f.srv.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: f.srv.URL, RetryOptions: &genai.HTTPRetryOptions{Attempts: &attempts}},
	})
	require.NoError(t, err)
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("Be brief.", genai.RoleUser), MaxOutputTokens: 64}
	resp, err := c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("What is a quota?"), cfg)
	require.NoError(t, err)
	require.Contains(t, resp.Text(), "What is a quota?")
	require.EqualValues(t, 7, resp.UsageMetadata.PromptTokenCount, "ceil((9+16)/4): the system instruction counts too")

	_, err = c.Models.GenerateContent(context.Background(), "gemini-2.5-flash", genai.Text("again"), cfg)
	var apiErr genai.APIError
	require.True(t, errors.As(err, &apiErr), "got %T: %v", err, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.Code)
	require.Equal(t, "RESOURCE_EXHAUSTED", apiErr.Status)
	require.Len(t, apiErr.Details, 2, "QuotaFailure and RetryInfo")
	require.EqualValues(t, 1, f.sim.Stats("gemini-2.5-flash").TooManyRequests, "the SDK did not retry")
}
