package classify_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/quota"
)

// now is the fixed clock every test reads: Saturday 14 March 2026, 08:09 in
// Los Angeles (daylight time began on the 8th).
var now = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)

// payloadCase is one provider answer and what classify must make of it.
type payloadCase struct {
	name   string
	status int
	header http.Header
	body   string

	class         classify.Class
	retryable     bool
	retryAfter    time.Duration
	hasRetryAfter bool
	code          string
	resetAt       time.Time
	axis          quota.Axis
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

var (
	nextMonth      = time.Date(2026, time.April, 1, 0, 0, 0, 0, time.UTC)
	nextLAMidnight = time.Date(2026, time.March, 15, 7, 0, 0, 0, time.UTC) // 00:00 PDT
)

// The payloads follow the providers' documented error formats:
//   - OpenAI: {"error":{"message","type","param","code"}} — platform.openai.com
//     docs/guides/error-codes and the spend-limits guide (429 with
//     organization_spend_limit_exceeded / project_spend_limit_exceeded, type
//     insufficient_quota);
//   - Anthropic: {"type":"error","error":{"type","message"},"request_id"} —
//     platform.claude.com/docs/en/api/errors; the tier spend cap is a 429
//     rate_limit_error with error.details.error_code
//     "enforced_spend_limit_reached" and no retry-after; a spend limit the
//     user set is a 400 invalid_request_error whose message begins "You have
//     reached your specified API usage limits" and says when access resumes;
//   - Gemini: google.rpc.Status {"error":{"code","message","status","details"}}
//     with QuotaFailure, RetryInfo and ErrorInfo details — ai.google.dev
//     docs/gemini-api/docs/troubleshooting and rate-limits.
//
// Ids, org names and numbers are changed; the shapes and codes are not.

var openAICases = []payloadCase{
	{
		name: "openai/429 rate_limit_exceeded with retry-after", status: 429,
		header: hdr("Retry-After", "20", "X-Should-Retry", "true"),
		body:   `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-abc123 on tokens per min (TPM): Limit 100000, Used 99918, Requested 2094. Please try again in 1.207s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
		class:  classify.RateLimited, retryable: true, retryAfter: 20 * time.Second, hasRetryAfter: true, code: "rate_limit_exceeded", axis: quota.Tokens,
	},
	{
		name: "openai/429 slow_down", status: 429,
		header: hdr("Retry-After-Ms", "1500"),
		body:   `{"error":{"message":"Please reduce the rate at which you are sending requests.","type":"rate_limit_error","param":null,"code":"slow_down"}}`,
		class:  classify.RateLimited, retryable: true, retryAfter: 1500 * time.Millisecond, hasRetryAfter: true, code: "slow_down",
	},
	{
		name: "openai/429 insufficient_quota", status: 429,
		header: hdr("X-Should-Retry", "false"),
		body:   `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		class:  classify.SpendCap, code: "insufficient_quota",
	},
	{
		name: "openai/429 project_spend_limit_exceeded", status: 429,
		body:  `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"project_spend_limit_exceeded"}}`,
		class: classify.SpendCap, code: "project_spend_limit_exceeded", resetAt: nextMonth,
	},
	{
		name: "openai/429 organization_spend_limit_exceeded", status: 429,
		body:  `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"organization_spend_limit_exceeded"}}`,
		class: classify.SpendCap, code: "organization_spend_limit_exceeded", resetAt: nextMonth,
	},
	{
		name: "openai/429 organization_usage_limit_exceeded", status: 429,
		body:  `{"error":{"message":"Your organization has reached its monthly usage limit.","type":"insufficient_quota","param":null,"code":"organization_usage_limit_exceeded"}}`,
		class: classify.SpendCap, code: "organization_usage_limit_exceeded", resetAt: nextMonth,
	},
	{
		name: "openai/429 credit_balance_exhausted", status: 429,
		body:  `{"error":{"message":"Your credit balance is exhausted. Add credits to continue.","type":"insufficient_quota","param":null,"code":"credit_balance_exhausted"}}`,
		class: classify.SpendCap, code: "credit_balance_exhausted",
	},
	{
		name: "openai/429 billing_hard_limit_reached", status: 429,
		body:  `{"error":{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}}`,
		class: classify.SpendCap, code: "billing_hard_limit_reached", resetAt: nextMonth,
	},
	{
		name: "openai/503 server_is_overloaded", status: 503,
		header: hdr("Retry-After", "2"),
		body:   `{"error":{"message":"Our servers are currently overloaded. Please try again later.","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}`,
		class:  classify.Overloaded, retryable: true, retryAfter: 2 * time.Second, hasRetryAfter: true, code: "server_is_overloaded",
	},
	{
		name: "openai/500 server_error", status: 500,
		body:  `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
		class: classify.Transient, retryable: true, code: "server_error",
	},
	{
		name: "openai/400 context_length_exceeded", status: 400,
		body:  `{"error":{"message":"This model's maximum context length is 200000 tokens. However, your messages resulted in 245630 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		class: classify.ContextTooLong, code: "context_length_exceeded",
	},
	{
		name: "openai/400 invalid_request_error", status: 400,
		body:  `{"error":{"message":"Invalid service_tier argument: The requested service tier is not allowed for this project.","type":"invalid_request_error","param":"service_tier","code":null}}`,
		class: classify.BadRequest, code: "invalid_request_error",
	},
	{
		name: "openai/401 invalid_api_key", status: 401,
		body:  `{"error":{"message":"Incorrect API key provided: sk-proj-****************************************abcd. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		class: classify.Auth, code: "invalid_api_key",
	},
	{
		name: "openai/403 unsupported_country_region_territory", status: 403,
		body:  `{"error":{"message":"Country, region, or territory not supported","type":"request_forbidden","param":null,"code":"unsupported_country_region_territory"}}`,
		class: classify.Auth, code: "unsupported_country_region_territory",
	},
	{
		name: "openai/404 model_not_found", status: 404,
		body:  `{"error":{"message":"The model ` + "`gpt-4o-nonexistent`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
		class: classify.NotFound, code: "model_not_found",
	},
	{
		name: "openai/429 with x-should-retry false", status: 429,
		header: hdr("X-Should-Retry", "false", "Retry-After", "5"),
		body:   `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		class:  classify.RateLimited, retryable: false, retryAfter: 5 * time.Second, hasRetryAfter: true, code: "rate_limit_exceeded", axis: quota.Requests,
	},
}

var anthropicCases = []payloadCase{
	{
		name: "anthropic/429 rate_limit_error", status: 429,
		header: hdr("Retry-After", "14", "Request-Id", "req_011CSHoEeqs5C35K2UUqR7Fy"),
		body:   `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (8c1d5c4a-2f8e-4c55-9d0b-7a7e0d1b2c3d) of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`,
		class:  classify.RateLimited, retryable: true, retryAfter: 14 * time.Second, hasRetryAfter: true, code: "rate_limit_error", axis: quota.InputTokens,
	},
	{
		name: "anthropic/429 enforced_spend_limit_reached", status: 429,
		body:  `{"type":"error","error":{"type":"rate_limit_error","message":"Your organization has reached its monthly usage limit for its API tier.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fz"}`,
		class: classify.SpendCap, code: "enforced_spend_limit_reached", resetAt: nextMonth,
	},
	{
		name: "anthropic/400 specified API usage limits", status: 400,
		body:  `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC."},"request_id":"req_011CSHoEeqs5C35K2UUqR7G0"}`,
		class: classify.SpendCap, code: "invalid_request_error", resetAt: nextMonth,
	},
	{
		name: "anthropic/400 workspace API usage limits with a mid-month date", status: 400,
		body:  `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified workspace API usage limits. You will regain access on 2026-03-20 at 12:00 UTC."},"request_id":"req_011CSHoEeqs5C35K2UUqR7G1"}`,
		class: classify.SpendCap, code: "invalid_request_error", resetAt: time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC),
	},
	{
		name: "anthropic/402 billing_error", status: 402,
		body:  `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"req_011CSHoEeqs5C35K2UUqR7G2"}`,
		class: classify.SpendCap, code: "billing_error",
	},
	{
		name: "anthropic/529 overloaded_error", status: 529,
		body:  `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G3"}`,
		class: classify.Overloaded, retryable: true, code: "overloaded_error",
	},
	{
		name: "anthropic/529 overloaded_error with x-should-retry false", status: 529,
		header: hdr("X-Should-Retry", "false"),
		body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G4"}`,
		class:  classify.Overloaded, retryable: false, code: "overloaded_error",
	},
	{
		name: "anthropic/400 prompt is too long", status: 400,
		body:  `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215432 tokens > 200000 maximum"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G5"}`,
		class: classify.ContextTooLong, code: "invalid_request_error",
	},
	{
		name: "anthropic/400 invalid_request_error", status: 400,
		body:  `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G6"}`,
		class: classify.BadRequest, code: "invalid_request_error",
	},
	{
		name: "anthropic/401 authentication_error", status: 401,
		body:  `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G7"}`,
		class: classify.Auth, code: "authentication_error",
	},
	{
		name: "anthropic/403 permission_error", status: 403,
		body:  `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."},"request_id":"req_011CSHoEeqs5C35K2UUqR7G8"}`,
		class: classify.Auth, code: "permission_error",
	},
	{
		name: "anthropic/404 not_found_error", status: 404,
		body:  `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nonexistent-1"},"request_id":"req_011CSHoEeqs5C35K2UUqR7G9"}`,
		class: classify.NotFound, code: "not_found_error",
	},
	{
		name: "anthropic/409 conflict_error", status: 409,
		body:  `{"type":"error","error":{"type":"conflict_error","message":"The resource was modified concurrently."},"request_id":"req_011CSHoEeqs5C35K2UUqR7GA"}`,
		class: classify.Transient, retryable: true, code: "conflict_error",
	},
	{
		name: "anthropic/500 api_error", status: 500,
		body:  `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_011CSHoEeqs5C35K2UUqR7GB"}`,
		class: classify.Transient, retryable: true, code: "api_error",
	},
	{
		name: "anthropic/504 timeout_error", status: 504,
		body:  `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"},"request_id":"req_011CSHoEeqs5C35K2UUqR7GC"}`,
		class: classify.Transient, retryable: true, code: "timeout_error",
	},
}

var geminiCases = []payloadCase{
	{
		name: "gemini/429 RESOURCE_EXHAUSTED per day", status: 429,
		body: `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},` +
			`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]}}`,
		class: classify.DailyQuota, retryAfter: 22 * time.Second, hasRetryAfter: true, code: "RESOURCE_EXHAUSTED", resetAt: nextLAMidnight, axis: quota.RequestsPerDay,
	},
	{
		name: "gemini/429 RESOURCE_EXHAUSTED per minute", status: 429,
		body: `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.0-flash"}}]},` +
			`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}`,
		class: classify.RateLimited, retryable: true, retryAfter: 34 * time.Second, hasRetryAfter: true, code: "RESOURCE_EXHAUSTED", axis: quota.InputTokens,
	},
	{
		name: "gemini/429 RESOURCE_EXHAUSTED with a sub-second delay", status: 429,
		body:  `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.5s"}]}}`,
		class: classify.RateLimited, retryable: true, retryAfter: 500 * time.Millisecond, hasRetryAfter: true, code: "RESOURCE_EXHAUSTED",
	},
	{
		// The project's prepaid balance is spent: the status of a rate
		// limit, a message that says otherwise, and no reset time (a human
		// must top it up). discuss.ai.google.dev threads, June 2026.
		name: "gemini/429 RESOURCE_EXHAUSTED prepayment credits depleted", status: 429,
		body:  `{"error":{"code":429,"message":"Your prepayment credits are depleted. Please go to AI Studio at https://ai.studio/projects to manage your project and billing.","status":"RESOURCE_EXHAUSTED"}}`,
		class: classify.SpendCap, code: "RESOURCE_EXHAUSTED",
	},
	{
		name: "gemini/503 UNAVAILABLE", status: 503,
		body:  `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
		class: classify.Overloaded, retryable: true, code: "UNAVAILABLE",
	},
	{
		name: "gemini/500 INTERNAL", status: 500,
		body:  `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}`,
		class: classify.Transient, retryable: true, code: "INTERNAL",
	},
	{
		name: "gemini/504 DEADLINE_EXCEEDED", status: 504,
		body:  `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`,
		class: classify.Transient, retryable: true, code: "DEADLINE_EXCEEDED",
	},
	{
		name: "gemini/400 API_KEY_INVALID", status: 400,
		body:  `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}`,
		class: classify.Auth, code: "API_KEY_INVALID",
	},
	{
		name: "gemini/403 PERMISSION_DENIED", status: 403,
		body:  `{"error":{"code":403,"message":"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.","status":"PERMISSION_DENIED"}}`,
		class: classify.Auth, code: "PERMISSION_DENIED",
	},
	{
		name: "gemini/404 NOT_FOUND", status: 404,
		body:  `{"error":{"code":404,"message":"models/gemini-nonexistent is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}`,
		class: classify.NotFound, code: "NOT_FOUND",
	},
	{
		name: "gemini/400 input token count exceeds the maximum", status: 400,
		body:  `{"error":{"code":400,"message":"The input token count (1251022) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`,
		class: classify.ContextTooLong, code: "INVALID_ARGUMENT",
	},
	{
		name: "gemini/400 INVALID_ARGUMENT", status: 400,
		body:  `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`,
		class: classify.BadRequest, code: "INVALID_ARGUMENT",
	},
	{
		name: "gemini/400 FAILED_PRECONDITION", status: 400,
		body:  `{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`,
		class: classify.BadRequest, code: "FAILED_PRECONDITION",
	},
	{
		name: "gemini/429 in a streamed array", status: 429,
		body:  `[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]`,
		class: classify.RateLimited, retryable: true, code: "RESOURCE_EXHAUSTED",
	},
}

// statusCases have no structured body: the status decides.
var statusCases = []payloadCase{
	{name: "status/200", status: 200, class: classify.OK},
	{name: "status/204 ignores an error-looking body", status: 204, body: `{"error":{"type":"overloaded_error"}}`, class: classify.OK},
	{name: "status/408", status: 408, class: classify.Transient, retryable: true},
	{name: "status/409", status: 409, class: classify.Transient, retryable: true},
	{name: "status/413", status: 413, body: "<html>Request Entity Too Large</html>", class: classify.BadRequest},
	{name: "status/429 plain text", status: 429, body: "Too Many Requests", header: hdr("Retry-After", "3"), class: classify.RateLimited, retryable: true, retryAfter: 3 * time.Second, hasRetryAfter: true},
	{name: "status/502 html", status: 502, body: "<html><body>Bad Gateway</body></html>", class: classify.Transient, retryable: true},
	{name: "status/503 empty", status: 503, class: classify.Overloaded, retryable: true},
	{name: "status/529 empty", status: 529, class: classify.Overloaded, retryable: true},
	{name: "status/404 plain", status: 404, body: "404 page not found", class: classify.NotFound},
	{name: "status/400 with x-should-retry true", status: 400, header: hdr("X-Should-Retry", "true"), class: classify.BadRequest, retryable: true},
	{name: "status/402", status: 402, class: classify.SpendCap},
	{name: "status/302", status: 302, class: classify.Unknown},
	{name: "status/0", status: 0, class: classify.Unknown},
}

func TestResponsePayloads(t *testing.T) {
	groups := map[string][]payloadCase{
		"openai": openAICases, "anthropic": anthropicCases, "gemini": geminiCases, "status": statusCases,
	}
	for _, group := range []string{"openai", "anthropic", "gemini", "status"} {
		for _, tc := range groups[group] {
			t.Run(tc.name, func(t *testing.T) {
				v := classify.Response(tc.status, tc.header, []byte(tc.body), now)
				require.Equal(t, tc.class, v.Class, "class")
				require.Equal(t, tc.retryable, v.Retryable, "retryable")
				require.Equal(t, tc.hasRetryAfter, v.HasRetryAfter, "has retry-after")
				require.Equal(t, tc.retryAfter, v.RetryAfter, "retry-after")
				require.Equal(t, tc.code, v.Code, "code")
				require.Equal(t, tc.resetAt, v.ResetAt, "reset at")
				require.Equal(t, tc.axis, v.Axis, "axis")
				require.Equal(t, tc.status, v.Status, "status")
				require.LessOrEqual(t, len(v.Reason), classify.MaxReasonLen)
				if tc.class != classify.OK && tc.class != classify.Unknown {
					require.NotEmpty(t, v.Reason)
				}
			})
		}
	}
}

// Every class a provider can answer with is covered by at least one payload
// of each provider that has it.
func TestPayloadsCoverEveryClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cases []payloadCase
		want  []classify.Class
	}{
		{"openai", openAICases, []classify.Class{classify.RateLimited, classify.Overloaded, classify.SpendCap, classify.Transient, classify.ContextTooLong, classify.BadRequest, classify.Auth, classify.NotFound}},
		{"anthropic", anthropicCases, []classify.Class{classify.RateLimited, classify.Overloaded, classify.SpendCap, classify.Transient, classify.ContextTooLong, classify.BadRequest, classify.Auth, classify.NotFound}},
		{"gemini", geminiCases, []classify.Class{classify.RateLimited, classify.Overloaded, classify.SpendCap, classify.DailyQuota, classify.Transient, classify.ContextTooLong, classify.BadRequest, classify.Auth, classify.NotFound}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[classify.Class]bool{}
			for _, c := range tc.cases {
				seen[c.class] = true
			}
			for _, c := range tc.want {
				require.True(t, seen[c], "no %s payload for %s", c, tc.name)
			}
		})
	}
}

func TestResponseRedactsSecrets(t *testing.T) {
	v := classify.Response(401, nil, []byte(payload(openAICases, "openai/401 invalid_api_key")), now)
	require.Equal(t, classify.Auth, v.Class)
	require.NotContains(t, v.Reason, "sk-proj")
	require.NotContains(t, v.Reason, "abcd")
	require.Contains(t, v.Reason, "Incorrect API key provided")
}

func TestResponseCapsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    classify.Classifier
		h    http.Header
		want time.Duration
	}{
		{"default cap", classify.Classifier{}, hdr("Retry-After", "3600"), classify.DefaultMaxRetryAfter},
		{"negative cap means default", classify.Classifier{MaxRetryAfter: -time.Second}, hdr("Retry-After", "3600"), classify.DefaultMaxRetryAfter},
		{"custom cap", classify.Classifier{MaxRetryAfter: 5 * time.Second}, hdr("Retry-After", "30"), 5 * time.Second},
		{"under the cap", classify.Classifier{MaxRetryAfter: 5 * time.Second}, hdr("Retry-After", "4"), 4 * time.Second},
		{"http-date far ahead", classify.Classifier{}, hdr("Retry-After", now.Add(2*time.Hour).Format(http.TimeFormat)), classify.DefaultMaxRetryAfter},
		{"gemini delay capped", classify.Classifier{}, nil, classify.DefaultMaxRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`
			if tc.h == nil {
				body = `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"x","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"120s"}]}}`
			}
			v := tc.c.Response(429, tc.h, []byte(body), now)
			require.True(t, v.HasRetryAfter)
			require.Equal(t, tc.want, v.RetryAfter)
		})
	}
}

func TestResponseIgnoresBadRetryAfter(t *testing.T) {
	const (
		openAIBody = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
		geminiBody = `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]}}`
	)
	for _, tc := range []struct {
		name    string
		h       http.Header
		body    string
		want    time.Duration
		present bool
	}{
		{"negative", hdr("Retry-After", "-5"), openAIBody, 0, false},
		{"NaN", hdr("Retry-After", "NaN"), openAIBody, 0, false},
		{"Inf", hdr("Retry-After", "+Inf"), openAIBody, 0, false},
		{"exponent", hdr("Retry-After", "1e9"), openAIBody, 0, false},
		{"absurd", hdr("Retry-After", "99999999999999999999"), openAIBody, 0, false},
		{"garbage", hdr("Retry-After", "soon"), openAIBody, 0, false},
		{"year 9999", hdr("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), openAIBody, 0, false},
		{"past date means now", hdr("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"), openAIBody, 0, true},
		{"bad ms falls back to seconds", hdr("Retry-After-Ms", "oops", "Retry-After", "7"), openAIBody, 7 * time.Second, true},
		{"ms wins over seconds", hdr("Retry-After-Ms", "250", "Retry-After", "7"), openAIBody, 250 * time.Millisecond, true},
		{"bad header falls back to gemini body", hdr("Retry-After", "garbage"), geminiBody, 22 * time.Second, true},
		{"bad ms and seconds fall back to gemini body", hdr("Retry-After-Ms", "-1", "Retry-After", "NaN"), geminiBody, 22 * time.Second, true},
		{"good header wins over gemini body", hdr("Retry-After", "7"), geminiBody, 7 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := classify.Response(429, tc.h, []byte(tc.body), now)
			require.Equal(t, classify.RateLimited, v.Class)
			require.Equal(t, tc.present, v.HasRetryAfter)
			require.Equal(t, tc.want, v.RetryAfter)
		})
	}
}

func TestResponseCarriesLimits(t *testing.T) {
	h := hdr("X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "120ms")
	for _, status := range []int{200, 429} {
		v := classify.Response(status, h, nil, now)
		require.Len(t, v.Limits, 1)
		require.Equal(t, int64(0), v.Limits[0].Remaining)
		require.Equal(t, 120*time.Millisecond, v.Limits[0].Reset)
	}
}

// payload returns the body of the case named name.
func payload(cases []payloadCase, name string) string {
	for _, c := range cases {
		if c.name == name {
			return c.body
		}
	}
	panic("classify_test: no payload named " + name)
}
