package classify

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// headerAxis maps one provider's rate-limit header family to an axis.
type headerAxis struct {
	axis                    quota.Axis
	limit, remaining, reset string
	// rfc3339 says the reset header is a time (Anthropic), not a duration
	// (OpenAI).
	rfc3339 bool
}

// headerAxes lists every header family Limits reads, Anthropic's first: when
// a response carries both (it never should), Anthropic's is the one kept.
var headerAxes = [...]headerAxis{
	{quota.Requests, "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", true},
	{quota.Tokens, "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", true},
	{quota.InputTokens, "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{quota.OutputTokens, "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
	{quota.Requests, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", false},
	{quota.Tokens, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", false},
}

// Limits reads the limits a provider reported in a response's headers, one
// Observation per axis, in quota.Axes() order, ready for quota.Store.Observe:
//
//   - OpenAI: x-ratelimit-{limit,remaining,reset}-{requests,tokens}, resets
//     as Go-style durations ("1s", "6m0s", "12ms", "1h2m3.5s") or plain
//     seconds;
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,
//     output-tokens}-{limit,remaining,reset}, resets as RFC 3339 times,
//     converted to durations from now (a reset in the past is 0).
//
// A value that is absent, negative or unreadable is reported as not given
// (-1 for Limit and Remaining, 0 for Reset); an axis with nothing readable is
// left out. Limits returns nil when the headers carry no limits. It never
// panics, whatever the headers hold.
func Limits(header http.Header, now time.Time) []quota.Observation {
	if len(header) == 0 {
		return nil
	}
	axes := quota.Axes()
	found := make([]*quota.Observation, int(axes[len(axes)-1])+1)
	for _, ha := range headerAxes {
		if found[ha.axis] != nil {
			continue
		}
		o := quota.Observation{Axis: ha.axis, Limit: headerCount(header, ha.limit), Remaining: headerCount(header, ha.remaining)}
		var resetOK bool
		if v := header.Get(ha.reset); v != "" {
			if ha.rfc3339 {
				o.Reset, resetOK = parseResetTime(v, now)
			} else {
				o.Reset, resetOK = parseResetDuration(v)
			}
		}
		if o.Limit < 0 && o.Remaining < 0 && !resetOK {
			continue
		}
		found[ha.axis] = &o
	}
	var obs []quota.Observation
	for _, a := range axes {
		if o := found[a]; o != nil {
			obs = append(obs, *o)
		}
	}
	return obs
}

// headerCount reads a non-negative integer header, or -1.
func headerCount(h http.Header, name string) int64 {
	v := strings.TrimSpace(h.Get(name))
	if v == "" || len(v) > maxNumberLen {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// parseResetDuration reads an OpenAI reset: a Go-style duration ("6m0s",
// "12ms", "1h2m3.5s") or, as some compatible servers send, plain seconds
// ("20", "0.5"). Negative, unreadable or absurdly long values give ok false.
func parseResetDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if d, ok := parseDecimal(s, time.Second); ok {
		return d, true
	}
	if s == "" || len(s) > maxNumberLen {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxSaneHint {
		return 0, false
	}
	return d, true
}

// parseResetTime reads an Anthropic reset (an RFC 3339 time) as the time left
// until it from now; 0 when it has passed.
func parseResetTime(s string, now time.Time) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if len(s) > maxNumberLen {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, false
	}
	return untilSane(t, now)
}
