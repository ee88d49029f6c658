package classify

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Response classifies one HTTP answer from a provider: its status, headers
// and body (the body may be nil; only its first 64 KiB are ever considered,
// and a longer body is classified by status alone). now is the time the
// answer arrived; Retry-After dates and rate-limit resets are read relative
// to it, and spend-cap resets computed from it.
//
// A 2xx answer is OK, whatever its body, with the limits its headers report.
// Otherwise the class comes from, in order of trust: a specific error code or
// type in the JSON body (Anthropic error.details.error_code and error.type,
// OpenAI error.code and error.type, Gemini error.status and its google.rpc
// details), then the body's message text (e.g. Anthropic's "prompt is too
// long" inside a generic invalid_request_error), then the HTTP status.
//
// Retry-After is read from retry-after-ms, then retry-after (delta-seconds,
// integer or decimal, or an HTTP-date), then Gemini's RetryInfo.retryDelay
// in the body. It is capped at MaxRetryAfter; a negative, NaN, infinite,
// absurd (over a year) or unreadable value counts as no hint; a date in the
// past means retry now (0 with HasRetryAfter true).
//
// x-should-retry: the official SDKs let a provider's "x-should-retry: true"
// or "false" override their status-based retry decision. Response does the
// same for Verdict.Retryable, but only where the class itself came from a
// retry judgement that the provider knows better (RateLimited, Overloaded,
// Transient, BadRequest, Auth, NotFound, Unknown). It never makes a SpendCap,
// DailyQuota or ContextTooLong retryable, because retrying such a call
// cannot succeed before a reset or a change to the request whatever the
// header says, and it never changes the Class.
//
// Response never panics, whatever it is given.
func (c Classifier) Response(status int, header http.Header, body []byte, now time.Time) Verdict {
	v := Verdict{Status: status, Limits: Limits(header, now)}
	if status >= 200 && status < 300 {
		v.Class = OK
		return v
	}
	p := parseBody(body)
	class, ok := p.class()
	if !ok {
		class = statusClass(status)
	}
	v.Class = class
	v.Code = p.code
	if v.Code == "" {
		v.Code = p.kind
	}
	v.Reason = reason(p.message)
	if v.Reason == "" && status != 0 {
		v.Reason = "HTTP " + strconv.Itoa(status) + " " + http.StatusText(status)
		v.Reason = strings.TrimSpace(v.Reason)
	}

	if d, ok := headerRetryAfter(header, now); ok {
		v.RetryAfter, v.HasRetryAfter = d, true
	} else if p.hasRetryDelay {
		v.RetryAfter, v.HasRetryAfter = p.retryDelay, true
	}
	if max := c.maxRetryAfter(); v.RetryAfter > max {
		v.RetryAfter = max
	}

	switch class {
	case RateLimited:
		v.Axis = p.rateAxis()
	case SpendCap:
		v.ResetAt = spendCapReset(p, now)
	case DailyQuota:
		v.Axis = p.rateAxis()
		v.ResetAt = nextPacificMidnight(now)
		v.Reason = reason("daily quota " + p.dailyQuota + " is spent")
	}

	v.Retryable = shouldRetry(class, header)
	return v
}

// spendCapReset says when a spend cap lifts: the date in Anthropic's
// spend-limit message, the next UTC month for monthly caps, or zero
// (unknown: credits or billing need a human).
func spendCapReset(p problem, now time.Time) time.Time {
	if t, ok := accessResumesAt(p.message); ok && t.After(now) {
		return t
	}
	if monthlyCaps[strings.ToLower(p.code)] {
		return nextMonthUTC(now)
	}
	if c, _ := textClass(p.message); c == SpendCap {
		// Anthropic's 400 for a spend limit the user set, without a date:
		// such limits are monthly.
		return nextMonthUTC(now)
	}
	return time.Time{}
}

// shouldRetry applies x-should-retry to the class's own retry decision, for
// the classes it may override (see Classifier.Response).
func shouldRetry(class Class, header http.Header) bool {
	retry := class.Retryable()
	switch class {
	case OK, SpendCap, DailyQuota, ContextTooLong, Canceled:
		return retry
	}
	switch strings.ToLower(strings.TrimSpace(header.Get("X-Should-Retry"))) {
	case "true":
		return true
	case "false":
		return false
	}
	return retry
}
