package classify

import (
	"strings"
)

// specificCodes maps error codes and types that name one cause to their
// class. Keys are lower case. They outrank the message text.
var specificCodes = map[string]Class{
	// Anthropic error.details.error_code and error.type.
	"enforced_spend_limit_reached":            SpendCap,
	"contract_spend_limit_reached":            SpendCap,
	"linked_organization_spend_limit_reached": SpendCap,
	"linked_organization_billing_unavailable": SpendCap,
	"billing_error":                           SpendCap,
	"ramp_limit_exceeded":                     RateLimited,
	"rate_limit_error":                        RateLimited,
	"overloaded_error":                        Overloaded,
	"compaction_unavailable":                  Overloaded,
	"authentication_error":                    Auth,
	"permission_error":                        Auth,
	"not_found_error":                         NotFound,
	"timeout_error":                           Transient,
	"conflict_error":                          Transient,
	"request_too_large":                       BadRequest,

	// OpenAI error.code and error.type.
	"insufficient_quota":                   SpendCap,
	"billing_hard_limit_reached":           SpendCap,
	"billing_not_active":                   SpendCap,
	"organization_spend_limit_exceeded":    SpendCap,
	"project_spend_limit_exceeded":         SpendCap,
	"organization_usage_limit_exceeded":    SpendCap,
	"credit_balance_exhausted":             SpendCap,
	"context_length_exceeded":              ContextTooLong,
	"rate_limit_exceeded":                  RateLimited,
	"slow_down":                            RateLimited,
	"server_is_overloaded":                 Overloaded,
	"engine_overloaded":                    Overloaded,
	"service_unavailable_error":            Overloaded,
	"invalid_api_key":                      Auth,
	"unsupported_country_region_territory": Auth,
	"model_not_found":                      NotFound,

	// Gemini error.status (google.rpc.Code) and ErrorInfo.reason.
	"resource_exhausted": RateLimited,
	"unavailable":        Overloaded,
	"unauthenticated":    Auth,
	"permission_denied":  Auth,
	"api_key_invalid":    Auth,
	"api_key_expired":    Auth,
	"not_found":          NotFound,
	"internal":           Transient,
	"deadline_exceeded":  Transient,
	"aborted":            Transient,
	"cancelled":          Transient,
}

// genericCodes maps codes and types too broad to outrank the message text:
// an invalid_request_error may be a context overflow or a spend limit.
var genericCodes = map[string]Class{
	"invalid_request_error": BadRequest,
	"invalid_argument":      BadRequest,
	"failed_precondition":   BadRequest,
	"out_of_range":          BadRequest,
	"api_error":             Transient,
	"server_error":          Transient,
}

// monthlyCaps are the spend-cap codes whose cap resets with the calendar
// month (taken as the UTC month): the key reopens at 00:00 UTC on the 1st.
// Other spend caps (credits exhausted, a billing problem) wait for a human.
var monthlyCaps = map[string]bool{
	"enforced_spend_limit_reached":      true,
	"billing_hard_limit_reached":        true,
	"organization_spend_limit_exceeded": true,
	"project_spend_limit_exceeded":      true,
	"organization_usage_limit_exceeded": true,
}

// textRules classify by the message when no specific code did, in order.
var textRules = [...]struct {
	class   Class
	phrases []string
}{
	{ContextTooLong, []string{"prompt is too long", "maximum context length", "context_length_exceeded", "context window", "exceeds the maximum number of tokens", "input is too long"}},
	// Anthropic's 400 for a spend limit the user set: "You have reached your
	// specified API usage limits" (or "workspace API usage limits").
	{SpendCap, []string{"api usage limits"}},
	{RateLimited, []string{"rate limit", "rate_limit", "ratelimit", "too many requests"}},
	{Overloaded, []string{"overloaded"}},
}

// class decides what p says, in order of trust: the Gemini daily-quota
// violation, Gemini's spend-cap message, a specific code, the message, a
// generic type. ok is false when
// the body says nothing usable.
func (p problem) class() (c Class, ok bool) {
	if p.dailyQuota != "" {
		return DailyQuota, true
	}
	code, kind := strings.ToLower(p.code), strings.ToLower(p.kind)
	if geminiSpendCap(kind, p.message) {
		return SpendCap, true
	}
	if c, ok := specificCodes[code]; ok {
		return c, true
	}
	if c, ok := specificCodes[kind]; ok {
		return c, true
	}
	if c, ok := textClass(p.message); ok {
		return c, true
	}
	if c, ok := genericCodes[kind]; ok {
		return c, true
	}
	if c, ok := genericCodes[code]; ok {
		return c, true
	}
	return Unknown, false
}

// textClass classifies a message by the phrases in textRules.
func textClass(msg string) (Class, bool) {
	if msg == "" {
		return Unknown, false
	}
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	l := strings.ToLower(msg)
	for _, r := range textRules {
		for _, ph := range r.phrases {
			if strings.Contains(l, ph) {
				return r.class, true
			}
		}
	}
	return Unknown, false
}

// statusClass classifies by HTTP status alone, the least trusted signal.
func statusClass(status int) Class {
	switch {
	case status >= 200 && status < 300:
		return OK
	case status == 401 || status == 403:
		return Auth
	case status == 402:
		return SpendCap
	case status == 404:
		return NotFound
	case status == 408 || status == 409:
		return Transient
	case status == 429:
		return RateLimited
	case status == 503 || status == 529:
		return Overloaded
	case status >= 500 && status < 600:
		return Transient
	case status >= 400 && status < 500:
		return BadRequest
	}
	return Unknown
}
