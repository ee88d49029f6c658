package activities

import (
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"
)

// The conversation, tools and tool choice of a Request in each SDK's
// types. Validate has run: schemas and arguments are JSON objects, and tool
// turns answer the calls before them.

// openAIMessages is the system prompt and the conversation as Chat
// Completions messages: a tool call is an assistant message's tool_calls
// entry, each tool result a "tool" message of its own.
func openAIMessages(req Request) []openai.ChatCompletionMessageParamUnion {
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleAssistant:
			if len(m.ToolCalls) == 0 {
				msgs = append(msgs, openai.AssistantMessage(m.Content))
				continue
			}
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Content != "" {
				a.Content.OfString = openai.String(m.Content)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: string(tc.arguments())},
					},
				})
			}
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case RoleTool:
			for _, tr := range m.ToolResults {
				msgs = append(msgs, openai.ToolMessage(tr.Content, tr.CallID))
			}
		default:
			msgs = append(msgs, openai.UserMessage(m.Content))
		}
	}
	return msgs
}

// openAITools sets params' tools and tool choice.
func openAITools(req Request, params *openai.ChatCompletionNewParams) {
	for _, t := range req.Tools {
		schema, _ := jsonObject(t.Parameters)
		if len(schema) == 0 {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(def))
	}
	c := req.ToolChoice
	switch {
	case c.Name != "":
		params.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: c.Name},
		}
	case c.Mode != "":
		params.ToolChoice.OfAuto = openai.String(c.Mode)
	}
}

// openAIToolCalls reads the function calls of a Chat Completions message.
func openAIToolCalls(calls []openai.ChatCompletionMessageToolCallUnion) []ToolCall {
	var out []ToolCall
	for _, c := range calls {
		if c.Type != "" && c.Type != "function" {
			continue
		}
		out = append(out, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: rawArguments(c.Function.Arguments)})
	}
	return out
}

// rawArguments keeps the model's arguments as they came when they are JSON,
// and as a JSON string otherwise (a model may write broken JSON), so the
// Response still fits in workflow history.
func rawArguments(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// anthropicMessages is the conversation as Messages turns: a tool call is a
// tool_use block of the assistant turn, the tool results a user turn of
// tool_result blocks.
func anthropicMessages(req Request) []anthropic.MessageParam {
	out := make([]anthropic.MessageParam, 0, len(req.Messages))
	for _, m := range req.Messages {
		switch m.Role {
		case RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" || len(m.ToolCalls) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, tc.arguments(), tc.Name))
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		case RoleTool:
			blocks := make([]anthropic.ContentBlockParamUnion, 0, len(m.ToolResults))
			for _, tr := range m.ToolResults {
				blocks = append(blocks, anthropic.NewToolResultBlock(tr.CallID, tr.Content, tr.IsError))
			}
			out = append(out, anthropic.NewUserMessage(blocks...))
		default:
			out = append(out, anthropic.NewUserMessage(anthropic.NewTextBlock(m.Content)))
		}
	}
	return out
}

// anthropicTools sets params' tools and tool choice. A tool's schema is
// sent whole: properties and required in the SDK's fields, every other
// keyword beside them.
func anthropicTools(req Request, params *anthropic.MessageNewParams) {
	for _, t := range req.Tools {
		schema, _ := jsonObject(t.Parameters)
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"]}
		if in.Properties == nil {
			in.Properties = map[string]any{}
		}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				in.Required = append(in.Required, fmt.Sprint(r))
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				if in.ExtraFields == nil {
					in.ExtraFields = map[string]any{}
				}
				in.ExtraFields[k] = v
			}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	c := req.ToolChoice
	switch {
	case c.Name != "":
		params.ToolChoice.OfTool = &anthropic.ToolChoiceToolParam{Name: c.Name}
	case c.Mode == ToolAuto:
		params.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{}
	case c.Mode == ToolRequired:
		params.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
	case c.Mode == ToolNone:
		params.ToolChoice.OfNone = &anthropic.ToolChoiceNoneParam{}
	}
}

// geminiContents is the conversation as Gemini contents: a tool call is a
// functionCall part of the model's turn, the tool results a user turn of
// functionResponse parts ({"output": content}, or {"error": content}).
func geminiContents(req Request) []*genai.Content {
	contents := make([]*genai.Content, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case RoleAssistant:
			var parts []*genai.Part
			if m.Content != "" || len(m.ToolCalls) == 0 {
				parts = append(parts, genai.NewPartFromText(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args, _ := jsonObject(tc.Arguments)
				parts = append(parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: tc.ID, Name: tc.Name, Args: args}})
			}
			contents = append(contents, genai.NewContentFromParts(parts, genai.RoleModel))
		case RoleTool:
			parts := make([]*genai.Part, 0, len(m.ToolResults))
			for _, tr := range m.ToolResults {
				key := "output"
				if tr.IsError {
					key = "error"
				}
				parts = append(parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{
					ID: tr.CallID, Name: toolName(req.Messages, i, tr.CallID), Response: map[string]any{key: tr.Content},
				}})
			}
			contents = append(contents, genai.NewContentFromParts(parts, genai.RoleUser))
		default:
			contents = append(contents, genai.NewContentFromText(m.Content, genai.RoleUser))
		}
	}
	return contents
}

// geminiTools sets cfg's function declarations and function calling
// config.
func geminiTools(req Request, cfg *genai.GenerateContentConfig) {
	if len(req.Tools) == 0 {
		return
	}
	decls := make([]*genai.FunctionDeclaration, 0, len(req.Tools))
	for _, t := range req.Tools {
		d := &genai.FunctionDeclaration{Name: t.Name, Description: t.Description}
		if schema, _ := jsonObject(t.Parameters); len(schema) > 0 {
			d.ParametersJsonSchema = schema
		}
		decls = append(decls, d)
	}
	cfg.Tools = []*genai.Tool{{FunctionDeclarations: decls}}
	c := req.ToolChoice
	fc := &genai.FunctionCallingConfig{}
	switch {
	case c.Name != "":
		fc.Mode, fc.AllowedFunctionNames = genai.FunctionCallingConfigModeAny, []string{c.Name}
	case c.Mode == ToolAuto:
		fc.Mode = genai.FunctionCallingConfigModeAuto
	case c.Mode == ToolRequired:
		fc.Mode = genai.FunctionCallingConfigModeAny
	case c.Mode == ToolNone:
		fc.Mode = genai.FunctionCallingConfigModeNone
	default:
		return
	}
	cfg.ToolConfig = &genai.ToolConfig{FunctionCallingConfig: fc}
}

// geminiToolCall is a functionCall part as a ToolCall; a call Gemini sent
// without an id gets "call_" and its position among the answer's parts.
func geminiToolCall(fc *genai.FunctionCall, index int) ToolCall {
	id := fc.ID
	if id == "" {
		id = fmt.Sprintf("call_%d", index)
	}
	args := json.RawMessage("{}")
	if len(fc.Args) > 0 {
		if b, err := json.Marshal(fc.Args); err == nil {
			args = b
		}
	}
	return ToolCall{ID: id, Name: fc.Name, Arguments: args}
}
