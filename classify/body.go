package classify

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// maxBodyLen bounds the error bodies parsed: provider error objects are a few
// hundred bytes, and a larger body (an HTML error page from a proxy) is
// classified by its status alone.
const maxBodyLen = 64 << 10

// problem is what a provider's JSON error body says, whichever provider sent
// it:
//
//	OpenAI:    {"error":{"message":…,"type":…,"param":…,"code":…}}
//	Anthropic: {"type":"error","error":{"type":…,"message":…,"details":{"error_code":…}},"request_id":…}
//	Gemini:    {"error":{"code":429,"message":…,"status":"RESOURCE_EXHAUSTED","details":[{"@type":…},…]}}
//
// The bare inner object (what openai.Error.RawJSON returns) and a Gemini
// stream's one-element array are read too.
type problem struct {
	// code is the most specific machine-readable code: Anthropic's
	// error.details.error_code, Gemini's ErrorInfo.reason, or OpenAI's
	// error.code.
	code string
	// kind is error.type (OpenAI, Anthropic) or error.status (Gemini).
	kind    string
	message string
	// retryDelay is Gemini's RetryInfo.retryDelay, when hasRetryDelay.
	retryDelay    time.Duration
	hasRetryDelay bool
	// dailyQuota names a per-day Gemini QuotaFailure violation, if any.
	dailyQuota string
	// quotaAxis is the axis of a Gemini QuotaFailure violation: the per-day
	// one when there is one (it decides the class), else the first that
	// names an axis; zero when none does.
	quotaAxis quota.Axis
}

// wireError is one error object on the wire. Fields are raw so that a field
// of an unexpected JSON type spoils only itself.
type wireError struct {
	Type    json.RawMessage `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message json.RawMessage `json:"message"`
	Status  json.RawMessage `json:"status"`
	Details json.RawMessage `json:"details"`
}

// wireBody is the outer object: either {"error": …} or the error itself.
type wireBody struct {
	Error json.RawMessage `json:"error"`
	wireError
}

// rpcDetail is one google.rpc error detail (RetryInfo, QuotaFailure,
// ErrorInfo); other @types are ignored.
type rpcDetail struct {
	Type       string          `json:"@type"`
	RetryDelay json.RawMessage `json:"retryDelay"`
	Reason     json.RawMessage `json:"reason"`
	Violations []struct {
		QuotaID     json.RawMessage `json:"quotaId"`
		QuotaMetric json.RawMessage `json:"quotaMetric"`
	} `json:"violations"`
}

// parseBody reads a provider's error body. It returns the zero problem for
// anything it cannot read; it never panics.
func parseBody(body []byte) problem {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || len(body) > maxBodyLen {
		return problem{}
	}
	if body[0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(body, &elems) != nil || len(elems) == 0 {
			return problem{}
		}
		body = bytes.TrimSpace(elems[0])
	}
	if len(body) == 0 || body[0] != '{' {
		return problem{}
	}
	var wb wireBody
	if json.Unmarshal(body, &wb) != nil {
		return problem{}
	}
	inner := bytes.TrimSpace(wb.Error)
	switch {
	case len(inner) > 0 && inner[0] == '{':
		var we wireError
		if json.Unmarshal(inner, &we) != nil {
			return problem{}
		}
		return we.problem()
	case len(inner) > 0 && inner[0] == '"':
		return problem{message: jsonString(inner)}
	case wb.Message != nil || wb.Code != nil:
		// The bare error object, as openai.Error.RawJSON gives it.
		return wb.wireError.problem()
	}
	return problem{}
}

func (we wireError) problem() problem {
	p := problem{
		code:    jsonString(we.Code), // OpenAI's string code; Gemini's is a number, ignored
		message: jsonString(we.Message),
		kind:    jsonString(we.Status),
	}
	if p.kind == "" {
		p.kind = jsonString(we.Type)
	}
	details := bytes.TrimSpace(we.Details)
	switch {
	case len(details) > 0 && details[0] == '{':
		// Anthropic: {"error_code": "enforced_spend_limit_reached", …}
		var d struct {
			ErrorCode json.RawMessage `json:"error_code"`
		}
		if json.Unmarshal(details, &d) == nil {
			if c := jsonString(d.ErrorCode); c != "" {
				p.code = c
			}
		}
	case len(details) > 0 && details[0] == '[':
		p.readRPCDetails(details)
	}
	return p
}

// readRPCDetails reads Gemini's google.rpc details, one element at a time so
// that one malformed element does not hide the others.
func (p *problem) readRPCDetails(details []byte) {
	var elems []json.RawMessage
	if json.Unmarshal(details, &elems) != nil {
		return
	}
	for _, e := range elems {
		var d rpcDetail
		if json.Unmarshal(e, &d) != nil {
			continue
		}
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			if !p.hasRetryDelay {
				p.retryDelay, p.hasRetryDelay = parseProtoDuration(jsonString(d.RetryDelay))
			}
		case strings.HasSuffix(d.Type, "google.rpc.QuotaFailure"):
			for _, v := range d.Violations {
				id, metric := jsonString(v.QuotaID), jsonString(v.QuotaMetric)
				for _, s := range [...]string{id, metric} {
					if p.dailyQuota == "" && isPerDay(s) {
						p.dailyQuota = s
					}
				}
				a := quotaAxis(id, metric)
				if a != 0 && (p.quotaAxis == 0 || a.Kind() == quota.DailyWindow && p.quotaAxis.Kind() != quota.DailyWindow) {
					p.quotaAxis = a
				}
			}
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo"):
			if r := jsonString(d.Reason); r != "" {
				p.code = r
			}
		}
	}
}

// isPerDay reports whether a Gemini quota id or metric names a daily quota
// ("GenerateRequestsPerDayPerProjectPerModel-FreeTier").
func isPerDay(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "perday") || strings.Contains(l, "per_day") || strings.Contains(l, "per-day")
}

// jsonString returns raw as a string when it is a JSON string, else "".
func jsonString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
