package llmsim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
)

// Tools (function calling). A call may declare tools in its provider's
// format (OpenAI tools[].function, Anthropic tools[], Gemini
// tools[].functionDeclarations[]) and a tool choice (OpenAI and Anthropic
// tool_choice, Gemini toolConfig.functionCallingConfig). The simulated model
// decides deterministically, from the conversation alone:
//
//   - tool choice none: it answers in text;
//   - a named tool (OpenAI {"type":"function","function":{"name":…}},
//     Anthropic {"type":"tool","name":…}, Gemini mode ANY with one allowed
//     name): it calls that tool;
//   - required (OpenAI "required", Anthropic "any", Gemini ANY): it calls a
//     tool, as for auto, even once every tool has been called;
//   - auto (or none given): with r tool results already in the
//     conversation, it calls tools[r] while r < len(tools), and answers in
//     text once every declared tool has been called once.
//
// A tool call's arguments are {"query": the last user message's text}; its
// id is "call_…" (OpenAI) or "toolu_…" (Anthropic), and Gemini sends none, as
// the Gemini API does for most models. The answer is an OpenAI message with
// tool_calls and finish_reason "tool_calls", an Anthropic tool_use block
// with stop_reason "tool_use", or a Gemini functionCall part with
// finishReason "STOP". Tool definitions, tool calls and tool results count
// as prompt characters. A tool result that answers no call of the assistant
// turn before it (OpenAI tool_call_id, Anthropic tool_use_id) or a Gemini
// functionResponse with no name is a 400, as the providers answer.

// toolChoice is a call's tool choice, provider-neutral.
type toolChoice struct {
	mode string // "auto", "none", "required" or "tool"
	name string // for "tool"
}

// toolCall is the model's call of one tool.
type toolCall struct {
	id, name string
	args     string // a JSON object
}

// chooseTool is the tool call the model makes for c, or nil when it
// answers in text.
func chooseTool(c call, requestID string) *toolCall {
	if len(c.tools) == 0 || c.choice.mode == "none" {
		return nil
	}
	name := c.choice.name
	if c.choice.mode != "tool" {
		r := c.toolResults
		if r >= len(c.tools) {
			if c.choice.mode != "required" {
				return nil
			}
			r %= len(c.tools)
		}
		name = c.tools[r]
	}
	args, _ := json.Marshal(map[string]string{"query": c.prompt})
	h := fnv.New32a()
	h.Write([]byte(requestID))
	return &toolCall{id: fmt.Sprintf("%08x", h.Sum32()), name: name, args: string(args)}
}

// declared reports whether name is one of c's tools.
func (c call) declared(name string) bool {
	for _, t := range c.tools {
		if t == name {
			return true
		}
	}
	return false
}

// rawChars counts the characters of a JSON value as sent (arguments,
// schemas, function responses).
func rawChars(raw json.RawMessage) int64 {
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	return runeCount(string(raw))
}
