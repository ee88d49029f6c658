package classify

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

var testNow = time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"integer seconds", "20", 20 * time.Second, true},
		{"decimal seconds", "1.5", 1500 * time.Millisecond, true},
		{"zero", "0", 0, true},
		{"spaces", "  7 ", 7 * time.Second, true},
		{"leading zeros", "0007", 7 * time.Second, true},
		{"IMF-fixdate", testNow.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{"RFC 850", "Saturday, 14-Mar-26 15:09:56 GMT", 30 * time.Second, true},
		{"ANSI C asctime", "Sat Mar 14 15:09:56 2026", 30 * time.Second, true},
		{"date in the past", "Wed, 21 Oct 2015 07:28:00 GMT", 0, true},
		{"a year of seconds is too much", "31708800", 0, false},
		{"just under the bound", "31536000", 365 * 24 * time.Hour, true},
		{"negative", "-1", 0, false},
		{"NaN", "NaN", 0, false},
		{"Inf", "Inf", 0, false},
		{"exponent", "1e3", 0, false},
		{"hex", "0x10", 0, false},
		{"two dots", "1.2.3", 0, false},
		{"lone dot", ".", 0, false},
		{"empty", "", 0, false},
		{"words", "in a minute", 0, false},
		{"huge", strings.Repeat("9", 40), 0, false},
		{"far future date", "Fri, 31 Dec 9999 23:59:59 GMT", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := parseRetryAfter(tc.in, testNow)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestHeaderRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"none", http.Header{}, 0, false},
		{"ms", http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, true},
		{"decimal ms", http.Header{"Retry-After-Ms": {"0.5"}}, 500 * time.Microsecond, true},
		{"ms first", http.Header{"Retry-After-Ms": {"100"}, "Retry-After": {"9"}}, 100 * time.Millisecond, true},
		{"bad ms falls through", http.Header{"Retry-After-Ms": {"-1"}, "Retry-After": {"9"}}, 9 * time.Second, true},
		{"bad both", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"y"}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := headerRetryAfter(tc.h, testNow)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestParseProtoDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"34s", 34 * time.Second, true},
		{"0.5s", 500 * time.Millisecond, true},
		{"1.000340s", 1000340 * time.Microsecond, true},
		{"0s", 0, true},
		{"34", 0, false},
		{"s", 0, false},
		{"-1s", 0, false},
		{"NaNs", 0, false},
		{"1m", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, ok := parseProtoDuration(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestParseResetDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1s", time.Second, true},
		{"6m0s", 6 * time.Minute, true},
		{"12ms", 12 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"20", 20 * time.Second, true},
		{"0.25", 250 * time.Millisecond, true},
		{"0s", 0, true},
		{"-1s", 0, false},
		{"9000h", 0, false},
		{"1d", 0, false},
		{"", 0, false},
		{"soon", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, ok := parseResetDuration(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestParseBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want problem
	}{
		{"empty", "", problem{}},
		{"not json", "<html>", problem{}},
		{"scalar", "42", problem{}},
		{"empty array", "[]", problem{}},
		{"error is a string", `{"error":"upstream exploded"}`, problem{message: "upstream exploded"}},
		{"bare openai object", `{"message":"m","type":"tokens","param":null,"code":"rate_limit_exceeded"}`, problem{code: "rate_limit_exceeded", kind: "tokens", message: "m"}},
		{"wrong field types", `{"error":{"message":7,"type":["x"],"code":{"a":1},"details":"nope"}}`, problem{}},
		{"gemini numeric code is not a code", `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"m"}}`, problem{kind: "RESOURCE_EXHAUSTED", message: "m"}},
		{"one bad detail spoils only itself", `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":7},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`,
			problem{kind: "RESOURCE_EXHAUSTED", retryDelay: 3 * time.Second, hasRetryDelay: true}},
		{"per-day metric", `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"x/requests_per_day"}]}]}}`,
			problem{kind: "RESOURCE_EXHAUSTED", dailyQuota: "x/requests_per_day", quotaAxis: quota.RequestsPerDay}},
		{"per-minute violation", `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"x/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"}]}]}}`,
			problem{kind: "RESOURCE_EXHAUSTED", quotaAxis: quota.InputTokens}},
		{"the per-day violation names the axis", `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[` +
			`{"quotaMetric":"x/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier"},` +
			`{"quotaMetric":"x/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}`,
			problem{kind: "RESOURCE_EXHAUSTED", dailyQuota: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", quotaAxis: quota.RequestsPerDay}},
		{"violation of odd types", `{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":7,"quotaId":["PerDay"]}]}]}}`,
			problem{kind: "RESOURCE_EXHAUSTED"}},
		{"anthropic details code", `{"type":"error","error":{"type":"rate_limit_error","message":"m","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			problem{code: "enforced_spend_limit_reached", kind: "rate_limit_error", message: "m"}},
		{"too long", `{"error":{"message":"` + strings.Repeat("a", maxBodyLen) + `"}}`, problem{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseBody([]byte(tc.body)))
		})
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "Overloaded", "Overloaded"},
		{"openai key", "Incorrect API key provided: sk-proj-abc123XYZ. You can find", "Incorrect API key provided: [redacted]. You can find"},
		{"masked key", "key sk-ant-****wxyz here", "key [redacted] here"},
		{"google key in url", "GET https://x.googleapis.com/v1?key=AIzaSyD-abcdefghijklmnop&alt=json", "GET https://x.googleapis.com/v1?[redacted]&alt=json"},
		{"bare google key", "bad key AIzaSyD-abcdefghijklmnop", "bad key [redacted]"},
		{"bearer", "Authorization: Bearer abc.def.ghi failed", "Authorization: [redacted] failed"},
		{"control characters", "line one\n\tline\x00two", "line one line two"},
		{"invalid utf-8", "bad \xff byte", "bad \uFFFD byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, reason(tc.in))
		})
	}
	t.Run("truncated on a rune boundary", func(t *testing.T) {
		r := reason(strings.Repeat("é", MaxReasonLen))
		require.LessOrEqual(t, len(r), MaxReasonLen)
		require.True(t, strings.HasSuffix(r, "…"))
		require.True(t, strings.ToValidUTF8(r, "?") == r)
	})
}
