package llmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// anthropicDialect speaks the Messages API.
type anthropicDialect struct{}

func (anthropicDialect) provider() string        { return Anthropic }
func (anthropicDialect) requestIDHeader() string { return "request-id" }

func (anthropicDialect) apiKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	return bearer(r.Header.Get("Authorization"))
}

type anthropicRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int64          `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream bool `json:"stream"`
	Tools  []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		CacheControl json.RawMessage `json:"cache_control,omitempty"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

// anthropicBlock is one content block of a message: text, tool_use or
// tool_result.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	// CacheControl marks a cache breakpoint after the block.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// anthropicPrefix is the blocks as the prompt cache matches them: without
// their cache_control, which moves from turn to turn, and whether any had
// one.
func anthropicPrefix(blocks []anthropicBlock) ([]byte, bool) {
	bp := false
	plain := make([]anthropicBlock, len(blocks))
	for i, b := range blocks {
		bp = bp || len(b.CacheControl) > 0 && string(b.CacheControl) != "null"
		b.CacheControl = nil
		plain[i] = b
	}
	raw, _ := json.Marshal(plain)
	return raw, bp
}

// anthropicBlocks reads a message content: a string, or an array of
// blocks.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, true
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, false
	}
	return blocks, true
}

func (anthropicDialect) parse(body []byte) (call, *apiError) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return call{}, &apiError{kind: kindInvalid, detail: "Request body is not valid JSON: " + err.Error()}
	}
	c := call{model: req.Model}
	switch {
	case req.Model == "":
		return c, &apiError{kind: kindInvalid, detail: "model: Field required"}
	case req.MaxTokens == nil:
		return c, &apiError{kind: kindInvalid, detail: "max_tokens: Field required"}
	case *req.MaxTokens < 1:
		return c, &apiError{kind: kindInvalid, detail: "max_tokens: Input should be greater than or equal to 1"}
	case len(req.Messages) == 0:
		return c, &apiError{kind: kindInvalid, detail: "messages: at least one message is required"}
	}
	c.maxTokens, c.stream = *req.MaxTokens, req.Stream
	// The cache's prefix order: tools, system, messages.
	for i, t := range req.Tools {
		if t.Name == "" || len(t.InputSchema) == 0 {
			return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("tools.%d: a custom tool needs name and input_schema", i)}
		}
		c.tools = append(c.tools, t.Name)
		c.chars += runeCount(t.Name) + runeCount(t.Description) + rawChars(t.InputSchema)
		bp := len(t.CacheControl) > 0 && string(t.CacheControl) != "null"
		t.CacheControl = nil
		raw, _ := json.Marshal(t)
		c.mark(raw, bp)
	}
	sys, ok := textOf(req.System)
	if !ok {
		return c, &apiError{kind: kindInvalid, detail: "system: must be a string or an array of text blocks"}
	}
	if sys != "" {
		c.chars += runeCount(sys)
		sysBlocks, _ := anthropicBlocks(req.System)
		raw, bp := anthropicPrefix(sysBlocks)
		c.mark(raw, bp)
	}
	c.choice = toolChoice{mode: "auto"}
	if tc := req.ToolChoice; tc != nil {
		switch {
		case tc.Type == "auto" || tc.Type == "none":
			c.choice.mode = tc.Type
		case tc.Type == "any":
			c.choice.mode = "required"
		case tc.Type == "tool" && c.declared(tc.Name):
			c.choice = toolChoice{mode: "tool", name: tc.Name}
		default:
			return c, &apiError{kind: kindInvalid, detail: "tool_choice: use type auto, any, none, or tool with the name of a declared tool"}
		}
		if len(c.tools) == 0 && tc.Type != "none" {
			return c, &apiError{kind: kindInvalid, detail: "tool_choice: may only be specified while providing tools"}
		}
	}
	var uses map[string]bool // the tool_use ids of the last assistant turn
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)}
		}
		blocks, ok := anthropicBlocks(m.Content)
		if !ok {
			return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("messages.%d.content: must be a string or an array of content blocks", i)}
		}
		if m.Role == "assistant" {
			uses = map[string]bool{}
		}
		var text string
		for j, b := range blocks {
			switch b.Type {
			case "text":
				text += b.Text
			case "tool_use":
				uses[b.ID] = true
				c.chars += runeCount(b.Name) + rawChars(b.Input)
			case "tool_result":
				if m.Role != "user" || !uses[b.ToolUseID] {
					return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)}
				}
				out, _ := textOf(b.Content)
				c.chars += runeCount(out)
				c.toolResults++
			}
		}
		c.chars += runeCount(text)
		if m.Role == "user" && text != "" {
			c.prompt = text
		}
		raw, bp := anthropicPrefix(blocks)
		c.mark(append([]byte(m.Role), raw...), bp)
	}
	return c, nil
}

// cost charges the prompt's tokens as the model counts them, and max_tokens
// output tokens until the answer is known (see adjust).
//
// Tokens read from the prompt cache are not counted against input tokens
// per minute: only input_tokens and cache_creation_input_tokens are, as
// Anthropic documents for its current models
// (https://docs.anthropic.com/en/api/rate-limits, "cache-aware ITPM").
func (anthropicDialect) cost(c call) cost {
	in := c.input - c.cacheRead
	return cost{requests: 1, input: in, output: c.maxTokens, tokens: in + c.maxTokens}
}

// adjust gives back the output tokens the answer did not use: Anthropic
// estimates output from max_tokens when a call starts and corrects it to the
// actual output at its end.
func (anthropicDialect) adjust(c call, a answer) cost {
	unused := max(c.maxTokens-a.out, 0)
	return cost{output: unused, tokens: unused}
}

// overloadStatus is Anthropic's overloaded_error status.
func (anthropicDialect) overloadStatus() int { return 529 }

// limitHeaders sets anthropic-ratelimit-{requests,input-tokens,output-tokens,
// tokens}-{limit,remaining,reset}; reset is the RFC 3339 time (rounded up to
// the second) at which the bucket is full again. The tokens family repeats
// whichever of input and output tokens has less remaining: the most
// restrictive limit in effect.
func (anthropicDialect) limitHeaders(h http.Header, l *limiter, now time.Time) {
	set := func(name string, b *bucket) {
		h.Set("anthropic-ratelimit-"+name+"-limit", strconv.FormatInt(int64(b.capacity), 10))
		h.Set("anthropic-ratelimit-"+name+"-remaining", strconv.FormatInt(b.remaining(), 10))
		h.Set("anthropic-ratelimit-"+name+"-reset", ceilSecond(now.Add(b.untilFull())).UTC().Format(time.RFC3339))
	}
	if l.requests != nil {
		set("requests", l.requests)
	}
	if l.input != nil {
		set("input-tokens", l.input)
	}
	if l.output != nil {
		set("output-tokens", l.output)
	}
	switch {
	case l.input != nil && l.output != nil:
		tightest := l.input
		if l.output.remaining() < l.input.remaining() {
			tightest = l.output
		}
		set("tokens", tightest)
	case l.input != nil:
		set("tokens", l.input)
	case l.output != nil:
		set("tokens", l.output)
	}
}

type anthropicErrorBody struct {
	Type      string         `json:"type"`
	Error     anthropicError `json:"error"`
	RequestID string         `json:"request_id"`
}

type anthropicError struct {
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Details map[string]string `json:"details,omitempty"`
}

func (d anthropicDialect) writeError(w http.ResponseWriter, e *apiError, requestID string) {
	body := anthropicError{Type: "invalid_request_error", Message: e.detail}
	switch e.kind {
	case kindRateLimit:
		body.Type = "rate_limit_error"
		body.Message = fmt.Sprintf("This request would exceed the rate limit for your organization on model %s. Please try again later.", e.model)
		if r := e.refusal; r != nil {
			unit := strings.ReplaceAll(r.axis, "_", " ") + " per minute"
			if r.axis == axisRequestsPerDay {
				unit = "requests per day"
			}
			if r.never {
				body.Message = fmt.Sprintf("This request would exceed your organization's rate limit of %d %s for %s (it asks for %d), so it can never succeed; reduce the prompt length or max_tokens.",
					r.limit, unit, e.model, r.requested)
			} else {
				body.Message = fmt.Sprintf("This request would exceed your organization's rate limit of %d %s for %s. Please try again in %s.",
					r.limit, unit, e.model, ceilMillis(r.wait))
			}
		}
	case kindSpendCap:
		body.Type = "rate_limit_error"
		body.Message = "You have reached your specified API usage limits. You will regain access when the limit resets or is raised."
		body.Details = map[string]string{"error_code": "enforced_spend_limit_reached"}
	case kindOverload:
		body.Type, body.Message = "overloaded_error", "Overloaded"
	case kindUnauthorized:
		body.Type, body.Message = "authentication_error", "invalid x-api-key"
		if e.missingKey {
			body.Message = "x-api-key header is required"
		}
	case kindContextLength:
		body.Message = fmt.Sprintf("prompt is too long: %d tokens > %d maximum", e.input+e.maxTokens, e.window)
		if e.window == 0 {
			body.Message = "prompt is too long"
		}
	case kindServerError:
		body.Type, body.Message = "api_error", "Internal server error"
	case kindNotFound:
		body.Type, body.Message = "not_found_error", "model: "+e.model
	}
	writeJSON(w, e.httpStatus(d.overloadStatus()), anthropicErrorBody{Type: "error", Error: body, RequestID: requestID})
}

func (anthropicDialect) writeAnswer(w http.ResponseWriter, c call, a answer, _ string, _ time.Time) {
	writeJSON(w, http.StatusOK, map[string]any{
		"id":            anthropicMessageID(a),
		"type":          "message",
		"role":          "assistant",
		"model":         c.model,
		"content":       []any{anthropicContent(a)},
		"stop_reason":   anthropicStopReason(a),
		"stop_sequence": nil,
		"usage":         anthropicUsage(a),
	})
}

func anthropicMessageID(a answer) string { return "msg_" + strings.TrimPrefix(a.id, "req_") }

// anthropicContent is an answer's content block: its text, or its
// tool_use.
func anthropicContent(a answer) map[string]any {
	if t := a.tool; t != nil {
		return map[string]any{"type": "tool_use", "id": "toolu_" + t.id, "name": t.name, "input": json.RawMessage(t.args)}
	}
	return map[string]any{"type": "text", "text": a.text}
}

// anthropicStopReason is "tool_use" for a tool call, "max_tokens" for an
// answer cut at max_tokens, else "end_turn".
func anthropicStopReason(a answer) string {
	switch {
	case a.tool != nil:
		return "tool_use"
	case a.truncated:
		return "max_tokens"
	}
	return "end_turn"
}

// anthropicUsage is an answer's usage object.
func anthropicUsage(a answer) map[string]any {
	return map[string]any{
		"input_tokens":                a.in - a.cacheRead - a.cacheWrite,
		"output_tokens":               a.out,
		"cache_creation_input_tokens": a.cacheWrite,
		"cache_read_input_tokens":     a.cacheRead,
		"service_tier":                "standard",
	}
}
