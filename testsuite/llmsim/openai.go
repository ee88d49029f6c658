package llmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// openAIDialect speaks Chat Completions.
type openAIDialect struct{}

func (openAIDialect) provider() string        { return OpenAI }
func (openAIDialect) requestIDHeader() string { return "x-request-id" }

func (openAIDialect) apiKey(r *http.Request) string {
	return bearer(r.Header.Get("Authorization"))
}

func bearer(h string) string {
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

type openAIRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (openAIDialect) parse(body []byte) (call, *apiError) {
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return call{}, &apiError{kind: kindInvalid, detail: "We could not parse the JSON body of your request: " + err.Error()}
	}
	c := call{model: req.Model}
	switch {
	case req.Model == "":
		return c, &apiError{kind: kindInvalid, param: "model", detail: "you must provide a model parameter"}
	case len(req.Messages) == 0:
		return c, &apiError{kind: kindInvalid, param: "messages", detail: "[] is too short - 'messages'"}
	case req.StreamOptions != nil && !req.Stream:
		return c, &apiError{kind: kindInvalid, param: "stream_options", detail: "The 'stream_options' parameter is only allowed when 'stream' is enabled."}
	}
	c.stream = req.Stream
	c.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return c, &apiError{kind: kindInvalid, param: fmt.Sprintf("tools[%d]", i), detail: fmt.Sprintf("Invalid 'tools[%d]': a function tool needs type 'function' and function.name.", i)}
		}
		c.tools = append(c.tools, t.Function.Name)
		c.chars += runeCount(t.Function.Name) + runeCount(t.Function.Description) + rawChars(t.Function.Parameters)
	}
	if len(req.Tools) > 0 {
		raw, _ := json.Marshal(req.Tools)
		c.mark(raw, false)
	}
	choice, perr := openAIToolChoice(req.ToolChoice, c)
	if perr != nil {
		return c, perr
	}
	c.choice = choice
	var calls map[string]bool // the tool calls of the last assistant message
	for i, m := range req.Messages {
		text, ok := textOf(m.Content)
		if !ok {
			return c, &apiError{kind: kindInvalid, param: fmt.Sprintf("messages[%d].content", i), detail: "content must be a string or an array of content parts"}
		}
		c.chars += runeCount(text)
		switch m.Role {
		case "user":
			c.prompt = text
		case "assistant":
			calls = map[string]bool{}
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = true
				c.chars += runeCount(tc.Function.Name) + runeCount(tc.Function.Arguments)
			}
		case "tool":
			if !calls[m.ToolCallID] {
				return c, &apiError{kind: kindInvalid, param: fmt.Sprintf("messages.[%d].tool_call_id", i),
					detail: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."}
			}
			c.toolResults++
		}
		raw, _ := json.Marshal(m)
		c.mark(raw, false)
	}
	for _, n := range [...]*int64{req.MaxCompletionTokens, req.MaxTokens} {
		if n != nil {
			if *n < 1 {
				return c, &apiError{kind: kindInvalid, param: "max_completion_tokens", detail: "max_completion_tokens must be at least 1"}
			}
			c.maxTokens = *n
			break
		}
	}
	return c, nil
}

// openAIToolChoice reads tool_choice: "none", "auto", "required" or
// {"type":"function","function":{"name":…}} naming a declared tool.
func openAIToolChoice(raw json.RawMessage, c call) (toolChoice, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{mode: "auto"}, nil
	}
	bad := &apiError{kind: kindInvalid, param: "tool_choice", detail: "Invalid value for 'tool_choice': use 'none', 'auto', 'required' or a named function."}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "none", "auto", "required":
			if len(c.tools) == 0 && mode != "none" {
				return toolChoice{}, &apiError{kind: kindInvalid, param: "tool_choice", detail: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."}
			}
			return toolChoice{mode: mode}, nil
		}
		return toolChoice{}, bad
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" || !c.declared(named.Function.Name) {
		return toolChoice{}, bad
	}
	return toolChoice{mode: "tool", name: named.Function.Name}, nil
}

// cost is OpenAI's documented up-front count: max(max_tokens, the prompt's
// tokens), never corrected after the call.
func (openAIDialect) cost(c call) cost {
	return cost{requests: 1, tokens: max(c.maxTokens, c.input)}
}

// overloadStatus is the status OpenAI sends when overloaded.
func (openAIDialect) overloadStatus() int { return http.StatusServiceUnavailable }

// limitHeaders sets x-ratelimit-{limit,remaining,reset}-{requests,tokens};
// reset is the time until the bucket is full again, as a Go duration.
func (openAIDialect) limitHeaders(h http.Header, l *limiter, _ time.Time) {
	for _, a := range [...]struct {
		name string
		b    *bucket
	}{{"requests", l.requests}, {"tokens", l.tokens}} {
		if a.b == nil {
			continue
		}
		h.Set("x-ratelimit-limit-"+a.name, strconv.FormatInt(int64(a.b.capacity), 10))
		h.Set("x-ratelimit-remaining-"+a.name, strconv.FormatInt(a.b.remaining(), 10))
		h.Set("x-ratelimit-reset-"+a.name, ceilMillis(a.b.untilFull()).String())
	}
}

type openAIErrorBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (d openAIDialect) writeError(w http.ResponseWriter, e *apiError, _ string) {
	body := openAIError{Type: "invalid_request_error"}
	switch e.kind {
	case kindRateLimit:
		body.Type, body.Code = "requests", strp("rate_limit_exceeded")
		body.Message = fmt.Sprintf("Rate limit reached for %s in organization org-llmsim on requests per min (RPM). Please try again later.", e.model)
		if r := e.refusal; r != nil {
			if r.axis == axisTokens {
				body.Type = "tokens"
			}
			if r.never {
				body.Message = fmt.Sprintf("Request too large for %s in organization org-llmsim on %s: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.",
					e.model, axisLabel(r.axis), r.limit, r.requested)
			} else {
				body.Message = fmt.Sprintf("Rate limit reached for %s in organization org-llmsim on %s: Limit %d, Requested %d. Please try again in %s.",
					e.model, axisLabel(r.axis), r.limit, r.requested, ceilMillis(r.wait))
			}
		}
	case kindSpendCap:
		body.Type, body.Code = "insufficient_quota", strp("insufficient_quota")
		body.Message = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
	case kindOverload:
		body.Type = "server_error"
		body.Message = "The server is overloaded or not ready yet."
	case kindUnauthorized:
		body.Code = strp("invalid_api_key")
		body.Message = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
		if e.missingKey {
			body.Message = "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
		}
	case kindContextLength:
		body.Param, body.Code = strp("messages"), strp("context_length_exceeded")
		body.Message = fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			e.window, e.input+e.maxTokens, e.input, e.maxTokens)
		if e.window == 0 {
			body.Message = "This model's maximum context length was exceeded. Please reduce the length of the messages or completion."
		}
	case kindServerError:
		body.Type = "server_error"
		body.Message = "The server had an error while processing your request. Sorry about that!"
	case kindNotFound:
		body.Code = strp("model_not_found")
		body.Message = fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", e.model)
	default:
		body.Param, body.Message = strp(e.param), e.detail
	}
	writeJSON(w, e.httpStatus(d.overloadStatus()), openAIErrorBody{Error: body})
}

func (openAIDialect) writeAnswer(w http.ResponseWriter, c call, a answer, _ string, now time.Time) {
	w.Header().Set("openai-version", "2020-10-01")
	w.Header().Set("openai-processing-ms", "1")
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      "chatcmpl-" + strings.TrimPrefix(a.id, "req_"),
		"object":  "chat.completion",
		"created": now.Unix(),
		"model":   c.model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       openAIMessage(a),
			"logprobs":      nil,
			"finish_reason": openAIFinishReason(a),
		}},
		"usage":              openAIUsage(a),
		"service_tier":       "default",
		"system_fingerprint": "fp_llmsim",
	})
}

// openAIMessage is an answer's assistant message: its text, or its tool
// call (content null).
func openAIMessage(a answer) map[string]any {
	m := map[string]any{"role": "assistant", "content": a.text, "refusal": nil, "annotations": []any{}}
	if t := a.tool; t != nil {
		m["content"] = nil
		m["tool_calls"] = []any{map[string]any{"id": "call_" + t.id, "type": "function",
			"function": map[string]any{"name": t.name, "arguments": t.args}}}
	}
	return m
}

// openAIFinishReason is "tool_calls" for a tool call, "length" for an
// answer cut at max_tokens, else "stop".
func openAIFinishReason(a answer) string {
	switch {
	case a.tool != nil:
		return "tool_calls"
	case a.truncated:
		return "length"
	}
	return "stop"
}

// openAIUsage is an answer's usage object.
func openAIUsage(a answer) map[string]any {
	return map[string]any{
		"prompt_tokens":             a.in,
		"completion_tokens":         a.out,
		"total_tokens":              a.in + a.out,
		"prompt_tokens_details":     map[string]any{"cached_tokens": a.cacheRead, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

// axisLabel names an axis the way OpenAI's rate-limit messages do.
func axisLabel(axis string) string {
	switch axis {
	case axisTokens:
		return "tokens per min (TPM)"
	case axisRequestsPerDay:
		return "requests per day (RPD)"
	}
	return "requests per min (RPM)"
}
