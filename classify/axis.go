package classify

import (
	"strings"

	"github.com/tollgate/tollgate/quota"
)

// rateAxis says which limit a rate-limit body names, from the most specific
// signal present: a Gemini QuotaFailure violation, OpenAI's error.type
// ("requests" or "tokens", with the message's "per min" or "per day" deciding
// the period), the metric in Gemini's "Quota exceeded for metric: …" message,
// then the message's own wording ("50,000 input tokens per minute", "requests
// per day (RPD)"). It returns zero when the body names no axis, and for a
// per-day Gemini violation (a DailyQuota) whose axis is not a per-day one.
func (p problem) rateAxis() quota.Axis {
	a := p.namedAxis()
	if p.dailyQuota != "" && a.Kind() != quota.DailyWindow {
		return 0
	}
	return a
}

// namedAxis is rateAxis before its DailyQuota check.
func (p problem) namedAxis() quota.Axis {
	if p.quotaAxis != 0 {
		return p.quotaAxis
	}
	msg := p.message
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	msg = strings.ToLower(msg)
	words := splitWords(msg)
	if r := kindResource(p.kind); r != 0 {
		return onPeriod(r, perDay(words))
	}
	if a := metricAxis(msg); a != 0 {
		return a
	}
	return textAxis(words)
}

// kindResource reads OpenAI's error.type of a 429, which names the bucket
// ("requests", "tokens") but not its period.
func kindResource(kind string) quota.Axis {
	switch strings.ToLower(strings.TrimSpace(kind)) {
	case "requests":
		return quota.Requests
	case "tokens":
		return quota.Tokens
	case "input_tokens":
		return quota.InputTokens
	case "output_tokens":
		return quota.OutputTokens
	}
	return 0
}

// onPeriod returns the axis limiting resource (Requests, Tokens, InputTokens
// or OutputTokens) per minute, or per day when day is set. Providers meter
// tokens per day as one total, so every token resource maps to TokensPerDay.
func onPeriod(resource quota.Axis, day bool) quota.Axis {
	if !day {
		return resource
	}
	if resource == quota.Requests {
		return quota.RequestsPerDay
	}
	return quota.TokensPerDay
}

// quotaAxis reads one Gemini QuotaFailure violation: the metric names the
// resource ("…/generate_content_free_tier_input_token_count", "…_requests")
// and the id its period ("GenerateRequestsPerDayPerProjectPerModel-FreeTier");
// either may stand in for the other. A violation that names no period is a
// per-minute one, as Response classifies it.
func quotaAxis(id, metric string) quota.Axis {
	r := quotaResource(metric)
	if r == 0 {
		r = quotaResource(id)
	}
	if r == 0 {
		return 0
	}
	return onPeriod(r, isPerDay(id) || isPerDay(metric))
}

// quotaResource finds the resource in a Gemini quota id or metric, ignoring
// case and the separators Google mixes ("input_token_count",
// "InputTokensPerModel").
func quotaResource(s string) quota.Axis {
	if len(s) > 512 {
		s = s[:512]
	}
	n := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return -1
	}, s)
	switch {
	case strings.Contains(n, "inputtoken"):
		return quota.InputTokens
	case strings.Contains(n, "outputtoken"):
		return quota.OutputTokens
	case strings.Contains(n, "token"):
		return quota.Tokens
	case strings.Contains(n, "request"):
		return quota.Requests
	}
	return 0
}

// metricPrefix introduces the metric in Gemini's message: "Quota exceeded
// for metric: generativelanguage.googleapis.com/…_requests, limit: 10".
const metricPrefix = "quota exceeded for metric:"

// metricAxis reads the axis of the metric a lower-cased Gemini message names,
// or zero when it names none.
func metricAxis(msg string) quota.Axis {
	i := strings.Index(msg, metricPrefix)
	if i < 0 {
		return 0
	}
	m := strings.TrimLeft(msg[i+len(metricPrefix):], " \t")
	if end := strings.IndexAny(m, ", \t\r\n"); end >= 0 {
		m = m[:end]
	}
	return quotaAxis("", m)
}

// textAxis reads the axis a message names in words (its splitWords):
//
//	OpenAI:    "… on tokens per min (TPM): Limit 30,000, Used …", "requests per day (RPD)"
//	Anthropic: "… rate limit of 50,000 input tokens per minute for …"
//	           "Number of request tokens has exceeded your per-minute rate limit"
//
// A resource directly before "per <period>" wins, then an abbreviation (RPM,
// TPM, RPD, TPD, ITPM, OTPM), then the first resource anywhere with a period
// anywhere. It returns zero when the message names no resource and period,
// as in "would exceed the rate limit for your organization on model X".
func textAxis(words []string) quota.Axis {
	for i := 1; i+1 < len(words); i++ {
		if words[i] != "per" {
			continue
		}
		day, ok := period(words[i+1])
		if !ok {
			continue
		}
		if r := resourceBefore(words, i); r != 0 {
			return onPeriod(r, day)
		}
	}
	for _, w := range words {
		switch w {
		case "rpm":
			return quota.Requests
		case "tpm":
			return quota.Tokens
		case "itpm":
			return quota.InputTokens
		case "otpm":
			return quota.OutputTokens
		case "rpd":
			return quota.RequestsPerDay
		case "tpd":
			return quota.TokensPerDay
		}
	}
	var resource quota.Axis
	day, hasPeriod := false, false
	for i, w := range words {
		if resource == 0 {
			switch {
			case w == "tokens" || w == "token":
				resource = resourceBefore(words, i+1)
			case w == "requests":
				resource = quota.Requests
			}
		}
		if !hasPeriod && w == "per" && i+1 < len(words) {
			day, hasPeriod = period(words[i+1])
		}
	}
	if resource == 0 || !hasPeriod {
		return 0
	}
	return onPeriod(resource, day)
}

// perDay reports whether the message's unit is a day: the unit of the axis
// it names, else the first "per min" or "per day" in it, else an RPD or TPD.
// A message that names no unit means a minute, the providers' default.
func perDay(words []string) bool {
	if a := textAxis(words); a != 0 {
		return a.Kind() == quota.DailyWindow
	}
	for i, w := range words {
		if w == "per" && i+1 < len(words) {
			if day, ok := period(words[i+1]); ok {
				return day
			}
		}
	}
	for _, w := range words {
		if w == "rpd" || w == "tpd" {
			return true
		}
	}
	return false
}

// resourceBefore reads the resource named by the words just before
// words[i]: "requests", "tokens", or "input" / "output" / "request" tokens
// (Anthropic's old "request tokens" are input tokens).
func resourceBefore(words []string, i int) quota.Axis {
	if i < 1 || i > len(words) {
		return 0
	}
	switch words[i-1] {
	case "requests", "request":
		return quota.Requests
	case "tokens", "token":
		if i < 2 {
			return quota.Tokens
		}
		switch words[i-2] {
		case "input", "request", "prompt":
			return quota.InputTokens
		case "output", "completion":
			return quota.OutputTokens
		}
		return quota.Tokens
	}
	return 0
}

// period reads the word after "per": day is true for a day, false for a
// minute; ok is false for any other word.
func period(w string) (day, ok bool) {
	switch w {
	case "min", "mins", "minute", "minutes":
		return false, true
	case "day", "days":
		return true, true
	}
	return false, false
}

// splitWords splits a lower-cased message into its runs of ASCII letters
// and digits: "50,000" is two words and "per-minute" is "per", "minute".
func splitWords(s string) []string {
	var words []string
	start := -1
	for i := 0; i <= len(s); i++ {
		alnum := i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || isDigit(s[i]))
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			words = append(words, s[start:i])
			start = -1
		}
	}
	return words
}
