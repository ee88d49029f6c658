package classify

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxSaneHint bounds every time a provider reports (a Retry-After, a reset):
// anything longer is broken or hostile and treated as not given at all, while
// anything up to it is honoured (Retry-After capped at MaxRetryAfter).
const maxSaneHint = 366 * 24 * time.Hour

// maxNumberLen bounds the numbers parsed from headers and bodies.
const maxNumberLen = 64

// headerRetryAfter reads the provider's Retry-After from h, as the official
// SDKs do: retry-after-ms (milliseconds) first, then retry-after
// (delta-seconds or an HTTP-date relative to now). A value that cannot be
// read falls through to the next; ok is false when none can. The result is
// not capped.
func headerRetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if d, ok := parseDecimal(v, time.Millisecond); ok {
			return d, true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		return parseRetryAfter(v, now)
	}
	return 0, false
}

// parseRetryAfter reads one retry-after value: delta-seconds (an integer or
// a decimal) or an HTTP-date in any of the three forms http.ParseTime knows.
// A date in the past means retry now (0, true). Negative, NaN, infinite,
// absurdly large or unreadable values give ok false.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if d, ok := parseDecimal(v, time.Second); ok {
		return d, true
	}
	if len(v) > 64 {
		return 0, false
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return untilSane(t, now)
}

// untilSane returns t-now, 0 when t has passed, and ok false when t is
// further away than maxSaneHint.
func untilSane(t, now time.Time) (time.Duration, bool) {
	d := t.Sub(now) // saturates instead of overflowing
	if d <= 0 {
		return 0, true
	}
	if d > maxSaneHint {
		return 0, false
	}
	return d, true
}

// parseProtoDuration reads a google.protobuf.Duration in its JSON form
// ("34s", "0.5s", "1.000340s"), as Gemini's RetryInfo.retryDelay carries it.
func parseProtoDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	num, found := strings.CutSuffix(s, "s")
	if !found {
		return 0, false
	}
	return parseDecimal(num, time.Second)
}

// parseDecimal reads a non-negative decimal number ("12", "1.5") of unit. It
// accepts only digits and one dot, so "NaN", "Inf", "-1", "1e9" and "0x10"
// are refused; so is anything above maxSaneHint.
func parseDecimal(s string, unit time.Duration) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if !isDecimal(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	f *= float64(unit)
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > float64(maxSaneHint) {
		return 0, false
	}
	return time.Duration(f), true
}

// isDecimal reports whether s is digits with at most one dot and at least one
// digit, no longer than maxNumberLen.
func isDecimal(s string) bool {
	if s == "" || len(s) > maxNumberLen {
		return false
	}
	digits, dots := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}
