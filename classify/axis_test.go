package classify_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// The axis of a rate limit, as each provider words it in its 429 body.
func TestResponseAxis(t *testing.T) {
	const (
		quotaFailure = `{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/`
		geminiQuota  = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
	)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		class  classify.Class
		axis   quota.Axis
	}{
		// OpenAI: error.type names the bucket, the message's unit its period.
		{"openai/requests per min", 429,
			`{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.Requests},
		{"openai/tokens per min", 429,
			`{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30,000, Used 29,500, Requested 1,200. Please try again in 2.4s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.Tokens},
		{"openai/requests per day", 429,
			`{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8.64s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.RequestsPerDay},
		{"openai/tokens per day", 429,
			`{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on tokens per day (TPD): Limit 2,000,000, Used 1,999,000, Requested 5,000. Please try again in 43m12s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.TokensPerDay},
		{"openai/request too large for the bucket", 429,
			`{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 35000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.Tokens},
		{"openai/type outranks the message's resource", 429,
			`{"error":{"message":"Rate limit reached on requests per day (RPD).","type":"tokens","code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.TokensPerDay},
		{"openai/type with a unit but no resource in the message", 429,
			`{"error":{"message":"Rate limit reached for gpt-4o-mini per day.","type":"tokens","code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.TokensPerDay},
		{"openai/type with no unit is per minute", 429,
			`{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.Requests},
		{"openai/no type: the message decides", 429,
			`{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 30000, Requested 10.","code":"rate_limit_exceeded"}}`,
			classify.RateLimited, quota.Tokens},
		{"openai/upper case", 429,
			`{"error":{"message":"RATE LIMIT REACHED FOR GPT-4O ON TOKENS PER DAY (TPD)","type":"TOKENS","code":"RATE_LIMIT_EXCEEDED"}}`,
			classify.RateLimited, quota.TokensPerDay},
		{"openai/bare object", 429,
			`{"message":"Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","code":"rate_limit_exceeded"}`,
			classify.RateLimited, quota.Requests},

		// Anthropic: the message alone names the limit.
		{"anthropic/input tokens per minute", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 50,000 input tokens per minute for claude-sonnet-4-5-20250929. Please try again in 2s."},"request_id":"req_1"}`,
			classify.RateLimited, quota.InputTokens},
		{"anthropic/output tokens per minute", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 8,000 output tokens per minute for claude-opus-4-1. Please try again in 7s."},"request_id":"req_1"}`,
			classify.RateLimited, quota.OutputTokens},
		{"anthropic/requests per minute", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 50 requests per minute for claude-3-5-haiku-20241022. Please try again in 1s."},"request_id":"req_1"}`,
			classify.RateLimited, quota.Requests},
		{"anthropic/requests per day", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 1,000 requests per day for claude-sonnet-4-5. Please try again in 3h12m."},"request_id":"req_1"}`,
			classify.RateLimited, quota.RequestsPerDay},
		{"anthropic/tokens per minute", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 90000 tokens per minute for claude-sonnet-4-5. Please try again in 1s."},"request_id":"req_1"}`,
			classify.RateLimited, quota.Tokens},
		{"anthropic/old wording: request tokens are input tokens", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit (https://docs.anthropic.com/en/api/rate-limits); see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later."}}`,
			classify.RateLimited, quota.InputTokens},
		{"anthropic/old wording: requests", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your per-minute rate limit (https://docs.anthropic.com/en/api/rate-limits); see the response headers for current usage."}}`,
			classify.RateLimited, quota.Requests},
		{"anthropic/upper case with extra words", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"THIS REQUEST WOULD EXCEED YOUR ORGANIZATION'S CURRENT RATE LIMIT OF 1,234,567 OUTPUT TOKENS PER MINUTE."}}`,
			classify.RateLimited, quota.OutputTokens},
		{"anthropic/names none", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization on model claude-sonnet-4-5. Please try again later."}}`,
			classify.RateLimited, 0},
		{"anthropic/concurrent connections name none", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Number of concurrent connections has exceeded your rate limit. Please try again later."}}`,
			classify.RateLimited, 0},

		// Gemini: the QuotaFailure's metric names the resource, its id the
		// period; without one, the message's metric.
		{"gemini/requests per minute", 429,
			`{"error":{"code":429,"message":"` + geminiQuota + `","status":"RESOURCE_EXHAUSTED","details":[` + quotaFailure +
				`generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]}]}}`,
			classify.RateLimited, quota.Requests},
		{"gemini/input tokens per minute", 429,
			`{"error":{"code":429,"message":"` + geminiQuota + `","status":"RESOURCE_EXHAUSTED","details":[` + quotaFailure +
				`generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}]}]}}`,
			classify.RateLimited, quota.InputTokens},
		{"gemini/requests per day", 429,
			`{"error":{"code":429,"message":"` + geminiQuota + `","status":"RESOURCE_EXHAUSTED","details":[` + quotaFailure +
				`generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`,
			classify.DailyQuota, quota.RequestsPerDay},
		{"gemini/input tokens per day", 429,
			`{"error":{"code":429,"message":"` + geminiQuota + `","status":"RESOURCE_EXHAUSTED","details":[` + quotaFailure +
				`generate_content_paid_tier_input_token_count","quotaId":"GenerateContentPaidTierInputTokensPerModelPerDay"}]}]}}`,
			classify.DailyQuota, quota.TokensPerDay},
		{"gemini/the per-day violation of two", 429,
			`{"error":{"code":429,"message":"` + geminiQuota + `","status":"RESOURCE_EXHAUSTED","details":[` + quotaFailure +
				`generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"},` +
				`{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`,
			classify.DailyQuota, quota.RequestsPerDay},
		{"gemini/metric in the message", 429,
			`{"error":{"code":429,"message":"` + geminiQuota + `\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 1,000,000, model: gemini-2.0-flash\nPlease retry in 34.7s.","status":"RESOURCE_EXHAUSTED"}}`,
			classify.RateLimited, quota.InputTokens},
		{"gemini/requests metric in the message", 429,
			`{"error":{"code":429,"message":"* QUOTA EXCEEDED FOR METRIC: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10","status":"RESOURCE_EXHAUSTED"}}`,
			classify.RateLimited, quota.Requests},
		{"gemini/names none", 429,
			`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`,
			classify.RateLimited, 0},
		{"gemini/an empty metric in the message", 429,
			`{"error":{"code":429,"message":"Quota exceeded for metric:","status":"RESOURCE_EXHAUSTED"}}`,
			classify.RateLimited, 0},

		// A 429 that names no limit, and answers that are no rate limit.
		{"429 plain text", 429, "Too Many Requests", classify.RateLimited, 0},
		{"429 empty", 429, "", classify.RateLimited, 0},
		{"openai/slow_down", 429,
			`{"error":{"message":"Please reduce the rate at which you are sending requests.","type":"rate_limit_error","code":"slow_down"}}`,
			classify.RateLimited, 0},
		{"openai/spend cap", 429,
			`{"error":{"message":"You exceeded your current quota of tokens per day.","type":"tokens","code":"insufficient_quota"}}`,
			classify.SpendCap, 0},
		{"anthropic/spend cap in a rate_limit_error", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"You have reached 50 requests per minute of your monthly usage limit.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			classify.SpendCap, 0},
		{"anthropic/overloaded", 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded: 50,000 input tokens per minute"}}`,
			classify.Overloaded, 0},
		{"openai/context too long", 400,
			`{"error":{"message":"This model's maximum context length is 128000 tokens per request.","type":"tokens","code":"context_length_exceeded"}}`,
			classify.ContextTooLong, 0},
		{"ok with a rate-limit body", 200,
			`{"error":{"message":"on requests per min (RPM)","type":"requests","code":"rate_limit_exceeded"}}`,
			classify.OK, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classify.Response(tc.status, nil, []byte(tc.body), now)
			require.Equal(t, tc.class, v.Class, "class")
			require.Equal(t, tc.axis, v.Axis, "axis %s", v.Axis)
		})
	}
}

// simModel is the one model each provider's simulator case calls.
var simModel = map[string]string{llmsim.OpenAI: "gpt-4o", llmsim.Anthropic: "claude-sonnet-4-5", llmsim.Gemini: "gemini-2.5-flash"}

// Every rate-limit body llmsim writes, for each axis it meters, gets through
// the official SDK to classify.Error with the axis the simulator refused on.
// The simulator's clock stands still, so nothing refills between calls: a
// limit of 1 request refuses the second call; a token limit below one call's
// cost refuses the first, with llmsim's "never" wording.
func TestErrorAxisOfSimulatorRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		model    llmsim.Model
		calls    int
		maxToken int64
		fault    bool // a FaultRateLimit instead of a limit: OpenAI and Gemini name requests, Anthropic no axis
		class    classify.Class
		axis     quota.Axis
	}{
		{"openai/requests per minute", llmsim.Model{Provider: llmsim.OpenAI, RequestsPerMinute: 1}, 2, 100, false, classify.RateLimited, quota.Requests},
		{"openai/tokens per minute", llmsim.Model{Provider: llmsim.OpenAI, TokensPerMinute: 150}, 2, 100, false, classify.RateLimited, quota.Tokens},
		{"openai/tokens per minute, too large", llmsim.Model{Provider: llmsim.OpenAI, TokensPerMinute: 50}, 1, 100, false, classify.RateLimited, quota.Tokens},
		{"openai/requests per day", llmsim.Model{Provider: llmsim.OpenAI, RequestsPerDay: 1}, 2, 100, false, classify.RateLimited, quota.RequestsPerDay},
		{"openai/fault", llmsim.Model{Provider: llmsim.OpenAI}, 1, 100, true, classify.RateLimited, quota.Requests},

		{"anthropic/requests per minute", llmsim.Model{Provider: llmsim.Anthropic, RequestsPerMinute: 1}, 2, 100, false, classify.RateLimited, quota.Requests},
		{"anthropic/input tokens per minute", llmsim.Model{Provider: llmsim.Anthropic, InputTokensPerMinute: 6}, 2, 100, false, classify.RateLimited, quota.InputTokens},
		{"anthropic/input tokens per minute, too large", llmsim.Model{Provider: llmsim.Anthropic, InputTokensPerMinute: 1}, 1, 100, false, classify.RateLimited, quota.InputTokens},
		{"anthropic/output tokens per minute, too large", llmsim.Model{Provider: llmsim.Anthropic, OutputTokensPerMinute: 50}, 1, 100, false, classify.RateLimited, quota.OutputTokens},
		{"anthropic/requests per day", llmsim.Model{Provider: llmsim.Anthropic, RequestsPerDay: 1}, 2, 100, false, classify.RateLimited, quota.RequestsPerDay},
		{"anthropic/fault", llmsim.Model{Provider: llmsim.Anthropic}, 1, 100, true, classify.RateLimited, 0},

		// Gemini's TPM counts input tokens, and its 429 says so
		// (generate_content_free_tier_input_token_count).
		{"gemini/requests per minute", llmsim.Model{Provider: llmsim.Gemini, RequestsPerMinute: 1}, 2, 0, false, classify.RateLimited, quota.Requests},
		{"gemini/tokens per minute", llmsim.Model{Provider: llmsim.Gemini, TokensPerMinute: 6}, 2, 0, false, classify.RateLimited, quota.InputTokens},
		{"gemini/tokens per minute, too large", llmsim.Model{Provider: llmsim.Gemini, TokensPerMinute: 1}, 1, 0, false, classify.RateLimited, quota.InputTokens},
		{"gemini/requests per day", llmsim.Model{Provider: llmsim.Gemini, RequestsPerDay: 1}, 2, 0, false, classify.DailyQuota, quota.RequestsPerDay},
		{"gemini/fault", llmsim.Model{Provider: llmsim.Gemini}, 1, 0, true, classify.RateLimited, quota.Requests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.model.Name = simModel[tc.model.Provider]
			sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{tc.model}}, llmsim.WithClock(llmsim.NewManualClock(now)))
			require.NoError(t, err)
			if tc.fault {
				require.NoError(t, sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Provider: tc.model.Provider, Times: 1}))
			}
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			for i := 1; i < tc.calls; i++ {
				require.NoError(t, callSim(t, srv.URL, tc.model.Provider, tc.maxToken), "call %d fits", i)
			}
			callErr := callSim(t, srv.URL, tc.model.Provider, tc.maxToken)
			require.Error(t, callErr)
			v := classify.Error(callErr, now)
			t.Logf("%s: %s", v.Class, v.Reason)
			require.Equal(t, tc.class, v.Class, "class")
			require.Equal(t, tc.axis, v.Axis, "axis %s", v.Axis)
		})
	}
}

// callSim makes one call to the simulator at url through provider's
// official SDK, retries off, and returns its error. The prompt is 15
// characters: 4 tokens as llmsim counts them.
func callSim(t *testing.T, url, provider string, maxTokens int64) error {
	t.Helper()
	ctx := context.Background()
	const prompt = "tell me a story"
	switch provider {
	case llmsim.OpenAI:
		c := openai.NewClient(openaioption.WithBaseURL(url+"/v1/"), openaioption.WithAPIKey("k"), openaioption.WithMaxRetries(0))
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: simModel[provider], MaxCompletionTokens: openai.Int(maxTokens),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
		return err
	case llmsim.Anthropic:
		c := anthropic.NewClient(anthropicoption.WithoutEnvironmentDefaults(), anthropicoption.WithBaseURL(url),
			anthropicoption.WithAPIKey("k"), anthropicoption.WithMaxRetries(0))
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(simModel[provider]), MaxTokens: maxTokens,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		return err
	}
	one := int32(1)
	c, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:      "AIza-test",
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: url, RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}},
	})
	require.NoError(t, err)
	_, err = c.Models.GenerateContent(ctx, simModel[provider], genai.Text(prompt), nil)
	return err
}
