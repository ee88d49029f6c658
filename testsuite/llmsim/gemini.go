package llmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Gemini API's generateContent, as the official SDKs call it against a
// base URL: POST {base}/v1beta/models/{model}:generateContent.
const (
	geminiPathPrefix = "/v1beta/models/"
	geminiMethod     = ":generateContent"
)

// geminiDailyRetryDelay is the RetryInfo sent with a per-day refusal. Gemini
// sends one there too (a recorded answer said "22s"), as short as a
// per-minute hint: only the QuotaFailure says the quota is daily, and a
// client that believes the delay asks again, and again, until midnight.
const geminiDailyRetryDelay = 22 * time.Second

// geminiDialect speaks the Gemini API (v1beta generateContent). The model is
// part of the path, not the body.
type geminiDialect struct {
	model string
}

// geminiRoute reports whether path is a generateContent call and for which
// model.
func geminiRoute(path string) (geminiDialect, bool) {
	rest, ok := strings.CutPrefix(path, geminiPathPrefix)
	if !ok {
		return geminiDialect{}, false
	}
	model, ok := strings.CutSuffix(rest, geminiMethod)
	if !ok || model == "" || strings.Contains(model, "/") {
		return geminiDialect{}, false
	}
	return geminiDialect{model: model}, true
}

func (geminiDialect) provider() string        { return Gemini }
func (geminiDialect) requestIDHeader() string { return "" }

// apiKey reads x-goog-api-key (what the SDKs send), or the key query
// parameter.
func (geminiDialect) apiKey(r *http.Request) string {
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text         string `json:"text"`
		FunctionCall *struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
	} `json:"parts"`
}

func (c geminiContent) text() string {
	var b strings.Builder
	for _, p := range c.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	GenerationConfig  struct {
		MaxOutputTokens *int64 `json:"maxOutputTokens"`
	} `json:"generationConfig"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig *struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
}

// geminiTools reads the function declarations and the function calling
// config into c.
func (req geminiRequest) tools(c *call) *apiError {
	for i, t := range req.Tools {
		for j, f := range t.FunctionDeclarations {
			if f.Name == "" {
				return &apiError{kind: kindInvalid, detail: fmt.Sprintf("* GenerateContentRequest.tools[%d].function_declarations[%d].name: Name cannot be empty.", i, j)}
			}
			c.tools = append(c.tools, f.Name)
			c.chars += runeCount(f.Name) + runeCount(f.Description) + rawChars(f.Parameters) + rawChars(f.ParametersJSONSchema)
		}
	}
	c.choice = toolChoice{mode: "auto"}
	if req.ToolConfig == nil || req.ToolConfig.FunctionCallingConfig == nil {
		return nil
	}
	fc := req.ToolConfig.FunctionCallingConfig
	switch fc.Mode {
	case "", "MODE_UNSPECIFIED", "AUTO":
	case "NONE":
		c.choice.mode = "none"
	case "ANY":
		c.choice.mode = "required"
		if len(fc.AllowedFunctionNames) == 1 && c.declared(fc.AllowedFunctionNames[0]) {
			c.choice = toolChoice{mode: "tool", name: fc.AllowedFunctionNames[0]}
		}
	default:
		return &apiError{kind: kindInvalid, detail: fmt.Sprintf("Invalid value at 'tool_config.function_calling_config.mode' (%s)", fc.Mode)}
	}
	return nil
}

func (d geminiDialect) parse(body []byte) (call, *apiError) {
	c := call{model: d.model}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return c, &apiError{kind: kindInvalid, detail: "Invalid JSON payload received. " + err.Error()}
	}
	if len(req.Contents) == 0 {
		return c, &apiError{kind: kindInvalid, detail: "* GenerateContentRequest.contents: contents is not specified"}
	}
	if req.SystemInstruction != nil {
		c.chars = runeCount(req.SystemInstruction.text())
	}
	if perr := req.tools(&c); perr != nil {
		return c, perr
	}
	if c.chars > 0 {
		raw, _ := json.Marshal([]any{req.SystemInstruction, req.Tools})
		c.mark(raw, false)
	}
	for i, m := range req.Contents {
		if m.Role != "" && m.Role != "user" && m.Role != "model" && m.Role != "function" {
			return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("Please use a valid role: user, model. (contents[%d].role is %q)", i, m.Role)}
		}
		for j, p := range m.Parts {
			switch {
			case p.FunctionCall != nil:
				c.chars += runeCount(p.FunctionCall.Name) + rawChars(p.FunctionCall.Args)
			case p.FunctionResponse != nil:
				if p.FunctionResponse.Name == "" {
					return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d].function_response.name: Name cannot be empty.", i, j)}
				}
				c.chars += runeCount(p.FunctionResponse.Name) + rawChars(p.FunctionResponse.Response)
				c.toolResults++
			}
		}
		text := m.text()
		c.chars += runeCount(text)
		if m.Role != "model" && text != "" {
			c.prompt = text
		}
		raw, _ := json.Marshal(m)
		c.mark(raw, false)
	}
	if n := req.GenerationConfig.MaxOutputTokens; n != nil {
		if *n < 1 {
			return c, &apiError{kind: kindInvalid, detail: fmt.Sprintf("Unable to submit request because it has a maxOutputTokens value of %d but the supported range is from 1 (inclusive) to 65537 (exclusive).", *n)}
		}
		c.maxTokens = *n
	}
	return c, nil
}

// cost charges one request and the prompt's tokens: Gemini's tokens per
// minute count input tokens only.
func (geminiDialect) cost(c call) cost {
	return cost{requests: 1, tokens: c.input}
}

// overloadStatus is Gemini's UNAVAILABLE.
func (geminiDialect) overloadStatus() int { return http.StatusServiceUnavailable }

// limitHeaders sets nothing: Gemini reports no limits in headers, only in
// its 429 bodies.
func (geminiDialect) limitHeaders(http.Header, *limiter, time.Time) {}

// geminiStatus is a google.rpc.Status, the error body Gemini sends:
// {"error":{"code":429,"message":…,"status":"RESOURCE_EXHAUSTED","details":[…]}}.
type geminiStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []any  `json:"details,omitempty"`
}

// geminiQuota is how Gemini names one of its quotas in a QuotaFailure.
type geminiQuota struct {
	metric, id string
}

// geminiQuotas names the quota behind each axis Sim meters for Gemini, as
// the free tier's 429s do.
var geminiQuotas = map[string]geminiQuota{
	axisRequests:       {"generativelanguage.googleapis.com/generate_content_free_tier_requests", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
	axisTokens:         {"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count", "GenerateContentInputTokensPerModelPerMinute-FreeTier"},
	axisRequestsPerDay: {"generativelanguage.googleapis.com/generate_content_free_tier_requests", "GenerateRequestsPerDayPerProjectPerModel-FreeTier"},
}

const geminiQuotaMessage = "You exceeded your current quota, please check your plan and billing details. " +
	"For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."

func (d geminiDialect) writeError(w http.ResponseWriter, e *apiError, _ string) {
	// Gemini sends no Retry-After header: the delay is the body's RetryInfo.
	w.Header().Del("retry-after")
	w.Header().Del("retry-after-ms")

	body := geminiStatus{Code: e.httpStatus(d.overloadStatus()), Message: e.detail, Status: "INVALID_ARGUMENT"}
	delay := e.retryAfter
	switch e.kind {
	case kindRateLimit:
		body.Status = "RESOURCE_EXHAUSTED"
		r := e.refusal
		if r == nil {
			// A Fault: Gemini names a quota in every rate limit, and a
			// fault stands for the per-minute requests one.
			r = &refusal{axis: axisRequests, limit: e.faultRPM}
		}
		q := geminiQuotas[r.axis]
		body.Message = fmt.Sprintf("%s\n* Quota exceeded for metric: %s, limit: %d, model: %s", geminiQuotaMessage, q.metric, r.limit, e.model)
		body.Details = append(body.Details, map[string]any{
			"@type": "type.googleapis.com/google.rpc.QuotaFailure",
			"violations": []any{map[string]any{
				"quotaMetric":     q.metric,
				"quotaId":         q.id,
				"quotaDimensions": map[string]string{"location": "global", "model": e.model},
				"quotaValue":      strconv.FormatInt(r.limit, 10),
			}},
		})
		switch {
		case r.never:
			body.Message += fmt.Sprintf("\nThe request asks for %d, more than the limit: it can never succeed; shorten the prompt.", r.requested)
		case r.axis == axisRequestsPerDay:
			delay = geminiDailyRetryDelay
		}
		if delay > 0 {
			body.Message += "\nPlease retry in " + protoDuration(delay) + "."
		}
	case kindSpendCap:
		// What Gemini answers once a project's prepaid balance is spent:
		// the status of a rate limit, told apart only by its message.
		body.Status = "RESOURCE_EXHAUSTED"
		body.Message = "Your prepayment credits are depleted. Please go to AI Studio at https://ai.studio/projects to manage your project and billing."
		delay = 0
	case kindOverload:
		body.Status, body.Message = "UNAVAILABLE", "The model is overloaded. Please try again later."
	case kindUnauthorized:
		if e.missingKey {
			body.Code, body.Status = http.StatusForbidden, "PERMISSION_DENIED"
			body.Message = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."
		} else {
			body.Code, body.Message = http.StatusBadRequest, "API key not valid. Please pass a valid API key."
			body.Details = append(body.Details, map[string]any{
				"@type":    "type.googleapis.com/google.rpc.ErrorInfo",
				"reason":   "API_KEY_INVALID",
				"domain":   "googleapis.com",
				"metadata": map[string]string{"service": "generativelanguage.googleapis.com"},
			})
		}
		if e.status != 0 {
			body.Code = e.status
		}
	case kindContextLength:
		body.Message = fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", e.input+e.maxTokens, e.window)
	case kindServerError:
		body.Status = "INTERNAL"
		body.Message = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	case kindNotFound:
		body.Status = "NOT_FOUND"
		body.Message = fmt.Sprintf("models/%s is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", e.model)
	}
	if e.kind != kindSpendCap && delay > 0 {
		body.Details = append(body.Details, map[string]any{
			"@type":      "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": protoDuration(delay),
		})
	}
	writeJSON(w, body.Code, map[string]geminiStatus{"error": body})
}

// protoDuration writes d as a google.protobuf.Duration in JSON: seconds with
// up to millisecond decimals, rounded up ("34s", "0.5s").
func protoDuration(d time.Duration) string {
	return strconv.FormatFloat(ceilMillis(d).Seconds(), 'f', -1, 64) + "s"
}

func (geminiDialect) writeAnswer(w http.ResponseWriter, c call, a answer, _ string, _ time.Time) {
	finish := "STOP"
	if a.truncated {
		finish = "MAX_TOKENS"
	}
	part := map[string]any{"text": a.text}
	if t := a.tool; t != nil {
		// The Gemini API gives most models' function calls no id.
		part = map[string]any{"functionCall": map[string]any{"name": t.name, "args": json.RawMessage(t.args)}}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"parts": []any{part}, "role": "model"},
			"finishReason": finish,
			"index":        0,
		}},
		"usageMetadata": geminiUsage(map[string]any{
			"promptTokenCount":     a.in,
			"candidatesTokenCount": a.out,
			"totalTokenCount":      a.in + a.out,
			"promptTokensDetails":  []any{map[string]any{"modality": "TEXT", "tokenCount": a.in}},
		}, a),
		"modelVersion": c.model,
		"responseId":   strings.TrimPrefix(a.id, "req_"),
	})
}

// geminiUsage adds cachedContentTokenCount, the part of the prompt read
// from the implicit cache, when there is one.
func geminiUsage(u map[string]any, a answer) map[string]any {
	if a.cacheRead > 0 {
		u["cachedContentTokenCount"] = a.cacheRead
	}
	return u
}
