package llmsim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"time"
	"unicode/utf8"
)

// dialect is one provider's wire format: how it authenticates, what a call
// costs, and how answers, errors and limit headers look.
type dialect interface {
	provider() string
	// requestIDHeader names the header carrying the request id; "" sends
	// none (Gemini puts its responseId in the body).
	requestIDHeader() string
	apiKey(r *http.Request) string
	parse(body []byte) (call, *apiError)
	cost(c call) cost
	overloadStatus() int
	limitHeaders(h http.Header, l *limiter, now time.Time)
	writeError(w http.ResponseWriter, e *apiError, requestID string)
	writeAnswer(w http.ResponseWriter, c call, a answer, requestID string, now time.Time)
}

// call is a parsed request, provider-neutral.
type call struct {
	model     string
	chars     int64  // characters of every message and the system prompt
	maxTokens int64  // 0 when the request set none (OpenAI only)
	prompt    string // the last user message's text
	// input is the prompt's tokens as the model counts them, and model the
	// model's configuration: set by Sim once the model is known.
	input int64
	spec  Model
	// stream: the caller asked for server-sent events (stream: true).
	stream bool
	// includeUsage: an OpenAI stream ends with a usage chunk
	// (stream_options.include_usage).
	includeUsage bool
	// tools names the declared tools in order, choice is the tool choice,
	// and toolResults counts the tool results in the conversation (see
	// chooseTool).
	tools       []string
	choice      toolChoice
	toolResults int
	// marks are the prompt's prefix boundaries, in order (see cache.go);
	// cacheRead and cacheWrite are the tokens read from and written to the
	// prompt cache, set by Sim, and hit the entry read.
	marks                 []mark
	cacheRead, cacheWrite int64
	hit                   uint64
}

// answer is the deterministic reply to a call.
type answer struct {
	id        string
	text      string
	truncated bool // cut at max_tokens
	in, out   int64
	// cacheRead and cacheWrite are the parts of in read from and written
	// to the prompt cache.
	cacheRead, cacheWrite int64
	// tool, when set, is the tool the model calls instead of answering in
	// text (text is then empty).
	tool *toolCall
}

// streamText is what a streamed answer's deltas carry: the text, or a tool
// call's arguments.
func (a answer) streamText() string {
	if a.tool != nil {
		return a.tool.args
	}
	return a.text
}

// errorKind is what went wrong; each dialect renders it in its own format.
type errorKind string

const (
	kindRateLimit     = errorKind(FaultRateLimit)
	kindSpendCap      = errorKind(FaultSpendCap)
	kindOverload      = errorKind(FaultOverload)
	kindUnauthorized  = errorKind(FaultUnauthorized)
	kindContextLength = errorKind(FaultContextLength)
	kindServerError   = errorKind(FaultServerError)
	kindInvalid       = errorKind(FaultInvalidRequest)
	kindNotFound      = errorKind("not_found")
)

// apiError is an error answer before rendering.
type apiError struct {
	kind       errorKind
	status     int // overrides the kind's status when non-zero
	model      string
	detail     string // message for kindInvalid
	param      string // field at fault for kindInvalid
	retryAfter time.Duration
	// retryAfterMs also sends retryAfter as retry-after-ms: set when the
	// model's Period is compressed below a minute, where whole seconds would
	// be coarser than the window itself.
	retryAfterMs bool
	refusal      *refusal // why a bucket refused (kindRateLimit)
	// faultRPM is the model's requests-per-minute limit for a rate limit a
	// Fault made (no bucket refused): what Gemini's QuotaFailure names.
	faultRPM   int64
	missingKey bool // kindUnauthorized: no key at all
	// kindContextLength
	window, input, maxTokens int64
}

// compose writes the deterministic reply: a fixed phrase, a hash of the prompt
// and the prompt itself, cut to max_tokens (as the model counts tokens) when
// set.
func compose(c call, requestID string) answer {
	a := answer{id: requestID, in: c.input, cacheRead: c.cacheRead, cacheWrite: c.cacheWrite}
	if tc := chooseTool(c, requestID); tc != nil {
		a.tool = tc
		a.out = c.spec.tokens(runeCount(tc.name) + runeCount(tc.args))
		return a
	}
	h := fnv.New32a()
	h.Write([]byte(c.prompt))
	text := fmt.Sprintf("llmsim %s reply %08x: %s", c.model, h.Sum32(), c.prompt)
	if c.maxTokens > 0 && c.spec.tokens(int64(utf8.RuneCountInString(text))) > c.maxTokens {
		runes := []rune(text)
		text = string(runes[:c.spec.chars(c.maxTokens)])
		a.truncated = true
	}
	a.text = text
	a.out = c.spec.tokens(int64(utf8.RuneCountInString(text)))
	return a
}

// adjuster is a dialect whose provider corrects a call's charge once the
// answer is known: it returns what the buckets get back.
type adjuster interface {
	adjust(c call, a answer) cost
}

// textOf reads a message content that is either a string or an array of
// blocks, keeping the text of "text" blocks.
func textOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", false
	}
	var out string
	for _, b := range blocks {
		if b.Type == "text" {
			out += b.Text
		}
	}
	return out, true
}

func runeCount(s string) int64 { return int64(utf8.RuneCountInString(s)) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ceilSecond rounds t up to a whole second, as reset times are sent.
func ceilSecond(t time.Time) time.Time {
	if tr := t.Truncate(time.Second); tr.Before(t) {
		return tr.Add(time.Second)
	}
	return t
}

// ceilMillis rounds d up to a whole millisecond, as OpenAI resets are sent.
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// httpStatus is the status e is sent with: its override, or its kind's,
// with overload as the dialect says.
func (e *apiError) httpStatus(overload int) int {
	if e.status != 0 {
		return e.status
	}
	switch e.kind {
	case kindRateLimit, kindSpendCap:
		return http.StatusTooManyRequests
	case kindOverload:
		return overload
	case kindUnauthorized:
		return http.StatusUnauthorized
	case kindNotFound:
		return http.StatusNotFound
	case kindServerError:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}
