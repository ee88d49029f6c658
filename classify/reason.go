package classify

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxReasonLen is the longest Verdict.Reason, in bytes.
const MaxReasonLen = 200

// secrets matches what looks like a credential inside a provider's message:
// OpenAI and Anthropic keys (sk-…, even masked), Google API keys (AIza…),
// bearer tokens and key=/token= query parameters.
var secrets = regexp.MustCompile(`(?i)\bsk-[a-z0-9_*\-]{3,}|\bAIza[0-9a-z_\-]{8,}|\bbearer\s+[^\s"',;]+|\b(?:api[_-]?key|key|token|access_token)=[^\s&"',;]+`)

// reason turns a provider's message into a Verdict.Reason: credentials
// masked, control characters and runs of spaces collapsed, invalid UTF-8
// replaced, cut to MaxReasonLen bytes on a rune boundary.
func reason(msg string) string {
	if len(msg) > 4*MaxReasonLen {
		msg = msg[:4*MaxReasonLen]
	}
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = secrets.ReplaceAllString(msg, "[redacted]")
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool {
		return r == ' ' || r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
	}), " ")
	if len(msg) <= MaxReasonLen {
		return msg
	}
	const ellipsis = "…"
	cut := MaxReasonLen - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}
