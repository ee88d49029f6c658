package activities

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// RoleTool is the role of a Message that carries tool results: what the
// caller's tools returned for the tool calls of the assistant message just
// before it. It is sent as OpenAI "tool" messages, an Anthropic user turn of
// tool_result blocks, and a Gemini user turn of functionResponse parts.
const RoleTool = "tool"

// The modes of a ToolChoice.
const (
	// ToolAuto lets the model choose between answering and calling tools:
	// the providers' default when tools are given.
	ToolAuto = "auto"
	// ToolNone forbids tool calls: the model answers in text.
	ToolNone = "none"
	// ToolRequired makes the model call at least one tool (OpenAI
	// "required", Anthropic "any", Gemini mode ANY).
	ToolRequired = "required"
)

// Tool is a function the model may call (function calling). It is sent as
// an OpenAI function tool, an Anthropic custom tool and a Gemini function
// declaration.
type Tool struct {
	// Name identifies the tool in the model's calls: 1 to 64 letters,
	// digits, '_' or '-', unique in the request. Required.
	Name string `json:"name"`
	// Description tells the model what the tool does and when to use it.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the tool's arguments: an object
	// schema ({"type":"object","properties":{…},"required":[…]}). Empty
	// means a tool that takes no arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// ToolChoice says whether and which tools the model must call. The zero
// value is ToolAuto.
type ToolChoice struct {
	// Mode is ToolAuto, ToolNone or ToolRequired; empty means ToolAuto
	// (or ToolRequired when Name is set).
	Mode string `json:"mode,omitempty"`
	// Name, when set, forces a call to the tool of that name, which must be
	// one of Request.Tools.
	Name string `json:"name,omitempty"`
}

// ToolCall is one call the model asked for, in an assistant Message and in
// Response.ToolCalls.
type ToolCall struct {
	// ID is the provider's id for the call, which the ToolResult answering
	// it repeats. Gemini may send none: Complete then gives the call an id
	// of its own ("call_" and its position), which it sends back.
	ID string `json:"id"`
	// Name is the tool called.
	Name string `json:"name"`
	// Arguments is the call's arguments: a JSON object, as the model wrote
	// it (it may not match the tool's schema: check it before use).
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is what a tool returned for one ToolCall, in a RoleTool
// Message.
type ToolResult struct {
	// CallID is the ToolCall.ID it answers. Required.
	CallID string `json:"call_id"`
	// Content is the tool's output, as text (JSON is fine).
	Content string `json:"content"`
	// IsError marks a failed tool run, for the model to react to (Anthropic
	// is_error; OpenAI and Gemini have no such flag: the content is sent
	// as it is, and Gemini's response is {"error": content}).
	IsError bool `json:"is_error,omitempty"`
}

// validToolName reports whether name is 1 to 64 letters, digits, '_' or
// '-': a name every one of the three providers accepts.
func validToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// jsonObject decodes raw as a JSON object; empty raw is an empty object.
func jsonObject(raw json.RawMessage) (map[string]any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, true
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// validateTools checks r's tools, tool choice and the tool calls and
// results of its messages.
func (r Request) validateTools() error {
	names := make(map[string]bool, len(r.Tools))
	for i, t := range r.Tools {
		field := fmt.Sprintf("request.tools[%d]", i)
		if !validToolName(t.Name) {
			return invalid(field+".name", t.Name, "is not a valid tool name",
				"use 1 to 64 letters, digits, '_' or '-', e.g. \"get_weather\"")
		}
		if names[t.Name] {
			return invalid(field+".name", t.Name, "names a tool given twice", "give each tool its own name")
		}
		names[t.Name] = true
		schema, ok := jsonObject(t.Parameters)
		if !ok {
			return invalid(field+".parameters", string(t.Parameters), "is not a JSON object",
				`give a JSON Schema object, e.g. {"type":"object","properties":{"city":{"type":"string"}}}, or leave it empty`)
		}
		if typ, set := schema["type"]; set && typ != "object" {
			return invalid(field+".parameters.type", fmt.Sprint(typ), "is not \"object\"",
				`the arguments of a tool call are an object: use {"type":"object","properties":{…}}`)
		}
	}
	c := r.ToolChoice
	switch c.Mode {
	case "", ToolAuto, ToolNone, ToolRequired:
	default:
		return invalid("request.tool_choice.mode", c.Mode, "is not a tool choice", `use "auto", "none" or "required", or leave it empty`)
	}
	if c != (ToolChoice{}) && len(r.Tools) == 0 {
		return invalid("request.tool_choice", c.Mode+c.Name, "is set but request.tools is empty", "declare the tools in request.tools, or leave tool_choice empty")
	}
	if c.Name != "" {
		if !names[c.Name] {
			return invalid("request.tool_choice.name", c.Name, "is not one of request.tools", "name a declared tool, or leave it empty")
		}
		if c.Mode != "" && c.Mode != ToolRequired {
			return invalid("request.tool_choice.mode", c.Mode, "contradicts tool_choice.name", `leave mode empty (or "required") to force the named tool`)
		}
	}
	for i := range r.Messages {
		if err := validateToolTurn(r.Messages, i); err != nil {
			return err
		}
	}
	return nil
}

// validateToolTurn checks message i's tool calls and results: calls only on
// assistant turns, results only on tool turns, and each tool turn answering
// exactly the calls of the assistant turn before it (as OpenAI and Anthropic
// require).
func validateToolTurn(msgs []Message, i int) error {
	m := msgs[i]
	field := fmt.Sprintf("request.messages[%d]", i)
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return invalid(field+".tool_calls", m.Role, "are set on a message that is not the assistant's",
			"tool calls are the model's: put them on an assistant message")
	}
	ids := make(map[string]bool, len(m.ToolCalls))
	for j, tc := range m.ToolCalls {
		f := fmt.Sprintf("%s.tool_calls[%d]", field, j)
		switch {
		case tc.ID == "":
			return invalid(f+".id", "", "is empty", "send back the id the model gave the call (Response.ToolCalls)")
		case ids[tc.ID]:
			return invalid(f+".id", tc.ID, "is given to two calls", "send back each call as the model gave it")
		case !validToolName(tc.Name):
			return invalid(f+".name", tc.Name, "is not a valid tool name", "send back the name the model called")
		}
		if _, ok := jsonObject(tc.Arguments); !ok {
			return invalid(f+".arguments", string(tc.Arguments), "is not a JSON object", "send back the arguments the model gave, or {}")
		}
		ids[tc.ID] = true
	}
	if m.Role != RoleTool {
		if len(m.ToolResults) > 0 {
			return invalid(field+".tool_results", m.Role, "are set on a message that is not a tool message", `put tool results on a message of role "tool"`)
		}
		if len(m.ToolCalls) > 0 && i+1 < len(msgs) && msgs[i+1].Role != RoleTool {
			return invalid(fmt.Sprintf("request.messages[%d].role", i+1), msgs[i+1].Role, "does not answer the tool calls before it",
				`follow an assistant message with tool calls by a "tool" message holding a result for each`)
		}
		return nil
	}
	if len(m.ToolResults) == 0 {
		return invalid(field+".tool_results", "", "is empty on a tool message", "give one result per tool call of the assistant message before it")
	}
	if m.Content != "" {
		return invalid(field+".content", m.Content, "is set on a tool message", "put the tools' output in tool_results[].content")
	}
	if i == 0 || len(msgs[i-1].ToolCalls) == 0 {
		return invalid(field+".role", m.Role, "follows no assistant message with tool calls",
			"send the assistant message with the model's tool calls (Response.ToolCalls) before their results")
	}
	calls := make(map[string]bool, len(msgs[i-1].ToolCalls))
	for _, tc := range msgs[i-1].ToolCalls {
		calls[tc.ID] = true
	}
	seen := make(map[string]bool, len(m.ToolResults))
	for j, tr := range m.ToolResults {
		f := fmt.Sprintf("%s.tool_results[%d].call_id", field, j)
		switch {
		case !calls[tr.CallID]:
			return invalid(f, tr.CallID, "answers no tool call of the message before it", "use the id of one of its tool calls")
		case seen[tr.CallID]:
			return invalid(f, tr.CallID, "answers a call answered already", "give one result per call")
		}
		seen[tr.CallID] = true
	}
	if len(seen) != len(calls) {
		return invalid(field+".tool_results", fmt.Sprint(len(seen)), fmt.Sprintf("answer %d of the %d tool calls before them", len(seen), len(calls)),
			"give a result for every tool call (an error text for one that failed)")
	}
	return nil
}

// toolCharacters counts the characters of the tools' definitions: the
// providers count them as prompt tokens.
func (r Request) toolCharacters() int64 {
	var n int64
	for _, t := range r.Tools {
		n += int64(utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + utf8.RuneCount(t.Parameters))
	}
	return n
}

// characters counts the characters of m: its text, its tool calls' names
// and arguments and its tool results' content.
func (m Message) characters() int64 {
	n := int64(utf8.RuneCountInString(m.Content))
	for _, tc := range m.ToolCalls {
		n += int64(utf8.RuneCountInString(tc.Name) + utf8.RuneCount(tc.Arguments))
	}
	for _, tr := range m.ToolResults {
		n += int64(utf8.RuneCountInString(tr.Content))
	}
	return n
}

// toolName is the name of the tool called with id in the assistant message
// before msgs[i], for Gemini's functionResponse, which names its function.
func toolName(msgs []Message, i int, id string) string {
	if i > 0 {
		for _, tc := range msgs[i-1].ToolCalls {
			if tc.ID == id {
				return tc.Name
			}
		}
	}
	return ""
}

// arguments returns a call's arguments as sent: "{}" for none.
func (c ToolCall) arguments() json.RawMessage {
	if len(bytes.TrimSpace(c.Arguments)) == 0 {
		return json.RawMessage("{}")
	}
	return c.Arguments
}
