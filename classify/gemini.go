package classify

import (
	"encoding/json"
	"errors"
	"strings"

	"google.golang.org/genai"
)

// geminiSpendCaps are what Gemini says when a project's money has run out.
// It answers with the 429 RESOURCE_EXHAUSTED of a rate limit ("Your
// prepayment credits are depleted. Please go to AI Studio …"): only the
// message tells the two apart, so these phrases outrank the status.
var geminiSpendCaps = []string{"prepayment credits are depleted"}

// geminiSpendCap reports whether a Gemini RESOURCE_EXHAUSTED answer is a
// spend cap rather than a rate limit. kind is the lower-cased error.status.
func geminiSpendCap(kind, message string) bool {
	if kind != "resource_exhausted" || message == "" {
		return false
	}
	if len(message) > 4096 {
		message = message[:4096]
	}
	l := strings.ToLower(message)
	for _, ph := range geminiSpendCaps {
		if strings.Contains(l, ph) {
			return true
		}
	}
	return false
}

// geminiError finds the Gemini SDK's error for an HTTP error answer (a
// genai.APIError, by value or pointer) in err's chain and returns its status
// and the google.rpc.Status body it was decoded from, re-encoded: the SDK
// keeps code, message, status and details, which is all Response reads.
func geminiError(err error) (status int, body []byte, ok bool) {
	var e genai.APIError
	if !errors.As(err, &e) {
		var p *genai.APIError
		if !errors.As(err, &p) || p == nil {
			return 0, nil, false
		}
		e = *p
	}
	if !rpcCodeName(e.Status) {
		// For a body that is not JSON the SDK puts the HTTP status line
		// there ("502 Bad Gateway"), which is no google.rpc code.
		e.Status = ""
	}
	body, mErr := json.Marshal(struct {
		Error genai.APIError `json:"error"`
	}{e})
	if mErr != nil {
		body = nil // classified by its status alone
	}
	return e.Code, body, true
}

// rpcCodeName reports whether s looks like a google.rpc.Code name:
// RESOURCE_EXHAUSTED, UNAVAILABLE, ….
func rpcCodeName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return s != ""
}
