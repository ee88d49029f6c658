package llmsim

import (
	"strconv"
	"time"
)

// FaultKind names an error a Fault makes a call return.
type FaultKind string

// The faults, each sent in the provider's own wire format.
const (
	// FaultRateLimit is a 429: OpenAI type "requests", code
	// "rate_limit_exceeded"; Anthropic "rate_limit_error"; Gemini
	// RESOURCE_EXHAUSTED with a per-minute QuotaFailure (and RetryInfo when
	// RetryAfter is set).
	FaultRateLimit FaultKind = "rate_limit"
	// FaultSpendCap is the spend-cap error, never with retry-after: OpenAI 429
	// "insufficient_quota"; Anthropic 429 "rate_limit_error" with
	// error.details.error_code "enforced_spend_limit_reached"; Gemini 429
	// RESOURCE_EXHAUSTED "Your prepayment credits are depleted".
	FaultSpendCap FaultKind = "spend_cap"
	// FaultOverload is Anthropic's 529 "overloaded_error", OpenAI's 503 or
	// Gemini's 503 UNAVAILABLE.
	FaultOverload FaultKind = "overload"
	// FaultUnauthorized is a 401: OpenAI code "invalid_api_key"; Anthropic
	// "authentication_error"; Gemini answers 400 API_KEY_INVALID instead.
	FaultUnauthorized FaultKind = "unauthorized"
	// FaultContextLength is a 400: OpenAI code "context_length_exceeded";
	// Anthropic "invalid_request_error" "prompt is too long"; Gemini
	// INVALID_ARGUMENT "The input token count … exceeds the maximum".
	FaultContextLength FaultKind = "context_length"
	// FaultServerError is a 500: OpenAI "server_error"; Anthropic "api_error";
	// Gemini INTERNAL.
	FaultServerError FaultKind = "server_error"
	// FaultInvalidRequest is a 400 "invalid_request_error" (OpenAI with code
	// and param null), the answer to a request the provider refuses as
	// malformed: what a test needs when the client validates everything Sim
	// would itself reject.
	FaultInvalidRequest FaultKind = "invalid_request"
)

// faultKinds lists every FaultKind, as validation errors name them.
const faultKinds = "rate_limit, spend_cap, overload, unauthorized, context_length, server_error, invalid_request, stall, disconnect"

// Fault is a rule that makes matching calls fail in a chosen way, for tests
// that need an exact sequence: "the next four calls to gpt-4o get a 429",
// "every call after the first gets the spend-cap error".
//
// Rules are checked in the order injected, after authentication and model
// lookup and before the spend cap, overload and buckets; the first rule that
// fires decides the call, and a failed call charges nothing. Rule-made
// responses carry the rate-limit headers too. A mid-stream rule that fires
// lets the call go on (to the spend cap, overload and buckets) and, if it
// is answered, strikes its stream.
type Fault struct {
	// Kind is the error returned. Required.
	Kind FaultKind `json:"kind" yaml:"kind"`
	// Provider limits the rule to OpenAI, Anthropic or Gemini calls; ""
	// matches all.
	Provider string `json:"provider" yaml:"provider"`
	// Model limits the rule to calls for this model; "" matches any.
	Model string `json:"model" yaml:"model"`
	// After lets this many matching calls through before the rule fires.
	After int `json:"after" yaml:"after"`
	// Times is how many calls the rule fails before it is spent; 0 means
	// every call from then on.
	Times int `json:"times" yaml:"times"`
	// RetryAfter, when positive, is sent as retry-after in whole seconds,
	// rounded up. Ignored for FaultSpendCap, which never sends one.
	RetryAfter time.Duration `json:"retry_after" yaml:"retry_after"`
	// Status overrides the kind's status code (e.g. 503 for an Anthropic
	// overload); 0 keeps it.
	Status int `json:"status" yaml:"status"`

	// MidStream makes an error kind strike a streamed call part-way instead
	// of refusing it: the call is answered (200, charged like any other),
	// AfterChunks text deltas are sent, then the error arrives as the
	// provider's SSE error event and the stream ends. A mid-stream rule
	// matches streamed calls only, and never sends retry-after (the
	// headers went out with the 200). FaultStall and FaultDisconnect are
	// always mid-stream.
	MidStream bool `json:"mid_stream" yaml:"mid_stream"`
	// AfterChunks is how many text deltas a mid-stream fault lets through
	// before it strikes; 0 strikes right after the stream's opening events.
	AfterChunks int `json:"after_chunks" yaml:"after_chunks"`
	// Stall is how long FaultStall holds the stream silent. Required for
	// FaultStall, unused by other kinds.
	Stall time.Duration `json:"stall" yaml:"stall"`
}

func (f Fault) validate(field string) error {
	switch f.Kind {
	case FaultRateLimit, FaultSpendCap, FaultOverload, FaultUnauthorized, FaultContextLength, FaultServerError, FaultInvalidRequest,
		FaultStall, FaultDisconnect:
	case "":
		return configErr(field+".kind", "", "is empty", "set one of "+faultKinds)
	default:
		return configErr(field+".kind", string(f.Kind), "is not a known fault", "use one of "+faultKinds)
	}
	switch f.Provider {
	case "", OpenAI, Anthropic, Gemini:
	default:
		return configErr(field+".provider", f.Provider, "is not a known provider", `use "openai", "anthropic", "gemini" or "" for all`)
	}
	if f.After < 0 {
		return configErr(field+".after", strconv.Itoa(f.After), "is negative", "use 0 to fire at once or a positive count")
	}
	if f.Times < 0 {
		return configErr(field+".times", strconv.Itoa(f.Times), "is negative", "use 0 for every call or a positive count")
	}
	if f.RetryAfter < 0 {
		return configErr(field+".retry_after", f.RetryAfter.String(), "is negative", "use 0 to send none or a positive duration such as 2s")
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return configErr(field+".status", strconv.Itoa(f.Status), "is not an error status", "use 0 for the kind's own status or a 4xx/5xx code")
	}
	return f.validateStream(field)
}

// rule is an injected Fault and how far along it is.
type rule struct {
	Fault
	seen  int // matching calls that reached the rule
	fired int // calls the rule failed
}

// fire reports whether the rule fails this call, and counts it. A
// mid-stream rule sees streamed calls only.
func (r *rule) fire(provider, model string, stream bool) bool {
	if (r.Provider != "" && r.Provider != provider) || (r.Model != "" && r.Model != model) || (r.midStream() && !stream) {
		return false
	}
	if r.Times > 0 && r.fired >= r.Times {
		return false
	}
	r.seen++
	if r.seen <= r.After {
		return false
	}
	r.fired++
	return true
}

// apiError turns a fired fault into the error to send.
func (f Fault) apiError(model string) *apiError {
	e := &apiError{kind: errorKind(f.Kind), model: model, status: f.Status}
	if f.Kind == FaultInvalidRequest {
		e.detail = "The request for " + model + " is invalid (llmsim fault invalid_request)."
	}
	if f.Kind != FaultSpendCap {
		e.retryAfter = f.RetryAfter
	}
	return e
}
