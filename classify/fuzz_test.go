package classify

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/quota"
)

// FuzzRetryAfter: whatever a provider puts in retry-after-ms, retry-after or
// Gemini's retryDelay, the hint is either absent or a duration in
// [0, MaxRetryAfter], and nothing panics.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{
		"20", "1.5", "0", "-1", "NaN", "Inf", "+Inf", "1e308", "0x10", "99999999999999999999",
		"Sat, 14 Mar 2026 15:09:56 GMT", "Saturday, 14-Mar-26 15:09:56 GMT", "Sat Mar 14 15:09:56 2026",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "", " ", ".", "1.", ".5",
	} {
		f.Add(s, "", "34s", int64(0))
		f.Add("", s, "0.5s", int64(1))
	}
	f.Fuzz(func(t *testing.T, ms, secs, delay string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		h := http.Header{}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if secs != "" {
			h.Set("Retry-After", secs)
		}
		if d, ok := headerRetryAfter(h, now); ok && (d < 0 || d > maxSaneHint) {
			t.Fatalf("headerRetryAfter(%q, %q) = %v", ms, secs, d)
		}
		if d, ok := parseProtoDuration(delay); ok && (d < 0 || d > maxSaneHint) {
			t.Fatalf("parseProtoDuration(%q) = %v", delay, d)
		}
		body := `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":` + jsonQuote(delay) + `}]}}`
		c := Classifier{MaxRetryAfter: 30 * time.Second}
		v := c.Response(429, h, []byte(body), now)
		if v.RetryAfter < 0 || v.RetryAfter > 30*time.Second {
			t.Fatalf("RetryAfter = %v outside [0, 30s]", v.RetryAfter)
		}
		if !v.HasRetryAfter && v.RetryAfter != 0 {
			t.Fatalf("RetryAfter = %v without a hint", v.RetryAfter)
		}
		if v.Class != RateLimited {
			t.Fatalf("class = %v, want rate_limited", v.Class)
		}
	})
}

// FuzzResetDuration: an OpenAI reset duration or an Anthropic reset time
// never panics, and is either unreported or within [0, maxSaneHint].
func FuzzResetDuration(f *testing.F) {
	for _, s := range []string{
		"1s", "6m0s", "12ms", "1h2m3.5s", "20", "0.25", "-1s", "9999999h", "1d", "", "soon",
		"2026-03-14T15:09:27Z", "2026-03-14T10:09:27-05:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z",
	} {
		f.Add(s, int64(1773500966))
	}
	f.Fuzz(func(t *testing.T, s string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		if d, ok := parseResetDuration(s); ok && (d < 0 || d > maxSaneHint) {
			t.Fatalf("parseResetDuration(%q) = %v", s, d)
		} else if !ok && d != 0 {
			t.Fatalf("parseResetDuration(%q) = %v, false", s, d)
		}
		if d, ok := parseResetTime(s, now); ok && (d < 0 || d > maxSaneHint) {
			t.Fatalf("parseResetTime(%q) = %v", s, d)
		}
		h := http.Header{}
		h.Set("X-Ratelimit-Reset-Tokens", s)
		h.Set("X-Ratelimit-Limit-Requests", s)
		h.Set("Anthropic-Ratelimit-Output-Tokens-Reset", s)
		for _, o := range Limits(h, now) {
			if !o.Axis.Valid() || o.Reset < 0 || o.Reset > maxSaneHint || o.Limit < -1 || o.Remaining < -1 {
				t.Fatalf("Limits(%q) gave %+v", s, o)
			}
		}
	})
}

// FuzzBody: any status and body gives a Verdict that holds together — a
// defined class, a bounded valid-UTF-8 reason, a capped hint, an axis only
// on a rate limit — and never panics.
func FuzzBody(f *testing.F) {
	seeds := []string{
		`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		`{"type":"error","error":{"type":"rate_limit_error","message":"m","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`,
		`{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC."}}`,
		`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215432 tokens > 200000 maximum"}}`,
		`{"error":{"code":429,"message":"q","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]}}`,
		`[{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]`,
		`{"error":{"message":"Rate limit reached for gpt-4o on tokens per day (TPD): Limit 2,000,000, Used 1,999,000","type":"tokens","code":"rate_limit_exceeded"}}`,
		`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
		`{"error":{"code":429,"message":"* Quota exceeded for metric: x/generate_content_free_tier_input_token_count, limit: 1","status":"RESOURCE_EXHAUSTED"}}`,
		`{"error":{"message":"per","type":"requests","code":"rate_limit_exceeded"}}`,
		`{"error":"plain"}`, `{"message":"bare","code":"context_length_exceeded"}`, `<html>502</html>`, ``, `[]`, `{"error":{"details":[1,"x",{}]}}`,
	}
	for i, s := range seeds {
		f.Add(400+i%5*29, s, "Retry-After: 5")
	}
	f.Fuzz(func(t *testing.T, status int, body, headerLine string) {
		h := http.Header{}
		if k, v, ok := strings.Cut(headerLine, ":"); ok {
			h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
		v := Response(status, h, []byte(body), now)
		if int(v.Class) >= numClasses {
			t.Fatalf("undefined class %d", v.Class)
		}
		if len(v.Reason) > MaxReasonLen || !utf8.ValidString(v.Reason) {
			t.Fatalf("reason %q", v.Reason)
		}
		if v.RetryAfter < 0 || v.RetryAfter > DefaultMaxRetryAfter {
			t.Fatalf("RetryAfter = %v", v.RetryAfter)
		}
		if v.Class.Terminal() && v.Retryable {
			t.Fatalf("%v verdict is retryable", v.Class)
		}
		if !v.ResetAt.IsZero() && (!v.Class.Terminal() || v.ResetAt.Before(now)) {
			t.Fatalf("ResetAt %v for %v", v.ResetAt, v.Class)
		}
		if v.Axis != 0 && (!v.Axis.Valid() || v.Axis.Kind() == quota.Leases || v.Axis.Spend() ||
			v.Class != RateLimited && v.Class != DailyQuota || v.Class == DailyQuota && v.Axis.Kind() != quota.DailyWindow) {
			t.Fatalf("axis %v for %v", v.Axis, v.Class)
		}
		if status >= 200 && status < 300 && v.Class != OK {
			t.Fatalf("status %d gave %v", status, v.Class)
		}
		_ = parseBody([]byte(body))
	})
}

// jsonQuote returns s as a JSON string literal, or a number when s is not
// valid UTF-8, so the fuzzer also reaches a retryDelay of the wrong type.
func jsonQuote(s string) string {
	if !utf8.ValidString(s) {
		return "7"
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
