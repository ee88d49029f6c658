package activities

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
)

// The providers a Request may name.
const (
	// OpenAI runs requests through Chat Completions.
	OpenAI = "openai"
	// Anthropic runs requests through the Messages API.
	Anthropic = "anthropic"
	// Gemini runs requests through the Gemini API's generateContent.
	Gemini = "gemini"
)

// The roles a Message may have (and RoleTool, for tool results). The
// system prompt is Request.System, not a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn of a conversation.
type Message struct {
	// Role is RoleUser, RoleAssistant or RoleTool.
	Role string `json:"role"`
	// Content is the turn's text; empty on a RoleTool message, and may be
	// empty on an assistant message that only calls tools.
	Content string `json:"content"`
	// ToolCalls, on an assistant message, are the tool calls the model made
	// in that turn (Response.ToolCalls, sent back as they came). The next
	// message must then be a RoleTool message answering each of them.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolResults, on a RoleTool message, answer the tool calls of the
	// assistant message just before it: one result per call.
	ToolResults []ToolResult `json:"tool_results,omitempty"`
}

// Request is a provider-neutral LLM call, the input of Activities.Complete.
// It is stored in workflow history (Temporal's JSON data converter), so it
// holds no secrets: the API key comes from the worker's Config.
type Request struct {
	// Provider is OpenAI, Anthropic or Gemini. Required.
	Provider string `json:"provider"`
	// Account names the provider account whose limits the call is metered
	// against (a quota.Key's Account); empty means the default account. The
	// worker's configured key for Provider is used whatever it says.
	Account string `json:"account,omitempty"`
	// Model is the provider's model id, e.g. "gpt-4o". Required.
	Model string `json:"model"`
	// System is the system prompt; empty sends none.
	System string `json:"system,omitempty"`
	// Messages is the conversation, oldest first. At least one is required.
	Messages []Message `json:"messages"`
	// MaxOutputTokens bounds the answer (OpenAI max_completion_tokens,
	// Anthropic max_tokens, Gemini maxOutputTokens). Required, positive: the
	// cost estimate is built from it.
	MaxOutputTokens int64 `json:"max_output_tokens"`
	// Temperature is the sampling temperature; nil leaves the provider's
	// default. OpenAI and Gemini accept [0, 2], Anthropic [0, 1].
	Temperature *float64 `json:"temperature,omitempty"`
	// Tenant, when set, meters the call under a tenant's own budget inside
	// the account's (a quota.Key's Tenant).
	Tenant string `json:"tenant,omitempty"`
	// Priority orders the call against others on the same key; the zero
	// value is quota.Normal.
	Priority quota.Priority `json:"priority,omitempty"`
	// Stream runs the call on the provider's streaming API (OpenAI Chat
	// Completions with stream_options.include_usage, Anthropic Messages
	// SSE): the activity heartbeats as the answer arrives and a stream
	// silent for the activity's HeartbeatTimeout is retried. The Response
	// is the same either way. An Anthropic call whose max_tokens the SDK
	// would refuse without streaming (one that may take over ten minutes)
	// streams whatever Stream says; see Activities.Complete.
	Stream bool `json:"stream,omitempty"`
	// Tools are the functions the model may call; none means a text-only
	// call. The model's calls come back in Response.ToolCalls, and their
	// results go in a RoleTool message of the next request.
	Tools []Tool `json:"tools,omitempty"`
	// ToolChoice says whether the model must, may or must not call tools;
	// the zero value lets it choose. Set only with Tools.
	ToolChoice ToolChoice `json:"tool_choice,omitzero"`
	// Caching asks for prompt caching and says which prefix the estimate
	// may expect to be read from the cache; see Caching.
	Caching Caching `json:"caching,omitzero"`
}

var _ quota.Governed = Request{}

// Validate reports an *InvalidRequestError naming the first bad field of r,
// or nil.
func (r Request) Validate() error {
	switch r.Provider {
	case OpenAI, Anthropic, Gemini:
	case "":
		return invalid("request.provider", "", "is empty", `set "openai", "anthropic" or "gemini"`)
	default:
		return invalid("request.provider", r.Provider, "is not a supported provider", `use "openai", "anthropic" or "gemini"`)
	}
	if r.Model == "" {
		return invalid("request.model", "", "is empty", `set the provider's model id, e.g. "gpt-4o"`)
	}
	if len(r.Messages) == 0 {
		return invalid("request.messages", "", "is empty", "send at least one user message")
	}
	for i, m := range r.Messages {
		if m.Role != RoleUser && m.Role != RoleAssistant && m.Role != RoleTool {
			return invalid(fmt.Sprintf("request.messages[%d].role", i), m.Role, "is not a supported role",
				`use "user", "assistant" or "tool"; put a system prompt in request.system`)
		}
	}
	if err := r.validateTools(); err != nil {
		return err
	}
	if err := r.validateCaching(); err != nil {
		return err
	}
	if r.MaxOutputTokens <= 0 {
		return invalid("request.max_output_tokens", strconv.FormatInt(r.MaxOutputTokens, 10), "must be positive",
			"bound the answer, e.g. 1024; the cost estimate is built from it")
	}
	if r.Provider == Gemini && r.MaxOutputTokens > math.MaxInt32 {
		return invalid("request.max_output_tokens", strconv.FormatInt(r.MaxOutputTokens, 10), "is more than Gemini's maxOutputTokens can hold",
			"use the model's output limit, e.g. 8192 or 65536")
	}
	if t := r.Temperature; t != nil {
		hi := maxTemperature(r.Provider)
		if math.IsNaN(*t) || *t < 0 || *t > hi {
			return invalid("request.temperature", strconv.FormatFloat(*t, 'g', -1, 64), "is out of range for "+r.Provider,
				fmt.Sprintf("use a value in [0, %g] or leave it unset", hi))
		}
	}
	if r.Priority != quota.Normal && r.Priority != quota.Low {
		return invalid("request.priority", strconv.Itoa(int(r.Priority)), "is not a known priority", "use quota.Normal (0) or quota.Low (-1)")
	}
	return nil
}

// maxTemperature is the highest sampling temperature the provider accepts:
// 2 for OpenAI Chat Completions and Gemini, 1 for Anthropic Messages.
func maxTemperature(provider string) float64 {
	if provider == Anthropic {
		return 1
	}
	return 2
}

// Characters counts the characters (Unicode code points) of the system
// prompt, the tools' definitions and every message (text, tool calls and
// tool results): what the estimators size a prompt by.
func (r Request) Characters() int64 {
	n := int64(utf8.RuneCountInString(r.System)) + r.toolCharacters()
	for _, m := range r.Messages {
		n += m.characters()
	}
	return n
}

// Key returns the quota key the request is metered under.
func (r Request) Key() quota.Key {
	return quota.Key{Provider: r.Provider, Account: r.Account, Model: r.Model, Tenant: r.Tenant}
}

// QuotaCharge implements quota.Governed: the request's key, the provider's
// estimate of its cost and its priority. It returns an *InvalidRequestError
// or a *quota.InvalidError naming the bad field.
func (r Request) QuotaCharge() (quota.Charge, error) {
	if err := r.Validate(); err != nil {
		return quota.Charge{}, err
	}
	key := r.Key()
	if err := key.Validate(); err != nil {
		return quota.Charge{}, err
	}
	var cost quota.Cost
	switch r.Provider {
	case OpenAI:
		cost = EstimateOpenAI(r.Characters(), r.MaxOutputTokens)
	case Anthropic:
		// Cache reads do not count toward Anthropic's input tokens per
		// minute: the warm prefix is charged nothing, and the prompt
		// calibrated is the rest.
		cold := r.Characters() - r.warmCharacters()
		cost = EstimateAnthropic(cold, r.MaxOutputTokens)
		return quota.Charge{Key: key, Cost: cost, Priority: r.Priority, Prompt: EstimateTokens(cold)}, nil
	case Gemini:
		cost = EstimateGemini(r.Characters(), r.MaxOutputTokens)
	}
	// The prompt's part is characters/4, which the store calibrates to
	// what the provider's tokenizer was seen to count.
	return quota.Charge{Key: key, Cost: cost, Priority: r.Priority, Prompt: EstimateTokens(r.Characters())}, nil
}

// WithModel returns a copy of r aimed at another provider and model (a
// fallback), with its own copy of Messages.
func (r Request) WithModel(provider, model string) Request {
	r.Provider, r.Model = provider, model
	r.Messages = append([]Message(nil), r.Messages...)
	r.Tools = append([]Tool(nil), r.Tools...)
	if r.Temperature != nil {
		t := *r.Temperature
		r.Temperature = &t
	}
	return r
}

// Usage is what a call used, from the provider's usage block.
type Usage struct {
	// InputTokens is the prompt's tokens, including those read from and
	// written to the prompt cache (for Gemini, including tool-use prompt
	// tokens).
	InputTokens int64 `json:"input_tokens"`
	// CacheReadTokens is the part of InputTokens read from the prompt
	// cache (Anthropic cache_read_input_tokens, OpenAI
	// prompt_tokens_details.cached_tokens, Gemini cachedContentTokenCount).
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens is the part of InputTokens written to the prompt
	// cache (Anthropic cache_creation_input_tokens; the others report
	// none).
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// OutputTokens is the answer's tokens (for Gemini, including thinking
	// tokens, which are billed as output).
	OutputTokens int64 `json:"output_tokens"`
}

// Response is the result of Activities.Complete.
type Response struct {
	// Text is the answer's text (Anthropic text blocks joined).
	Text string `json:"text"`
	// FinishReason is the provider's own: OpenAI "stop", "length", …;
	// Anthropic "end_turn", "max_tokens", …; Gemini "STOP", "MAX_TOKENS", …,
	// or the prompt's block reason when Gemini answered with no candidate.
	FinishReason string `json:"finish_reason"`
	// Usage is what the call used.
	Usage Usage `json:"usage"`
	// Provider is the provider that answered.
	Provider string `json:"provider"`
	// Model is the model that answered, as the provider reported it.
	Model string `json:"model"`
	// RequestID is the provider's request id (OpenAI x-request-id,
	// Anthropic request-id, Gemini responseId), for support tickets.
	RequestID string `json:"request_id,omitempty"`
	// RateLimitTokens, when positive, is what the provider counted against
	// its tokens-per-minute limit, where that is not the usage: OpenAI
	// counts its up-front estimate, the larger of max_tokens and the
	// prompt's tokens, and does not correct it afterwards; Gemini counts
	// the prompt's tokens only.
	RateLimitTokens int64 `json:"rate_limit_tokens,omitempty"`
	// ToolCalls are the tool calls the model made, in order; none when it
	// answered in text. Run them, then send the answer back as an
	// assistant Message (Text and ToolCalls) followed by a RoleTool
	// Message with one ToolResult per call.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// PromptEstimate is the whole prompt's estimated tokens as the request
	// was sized (EstimateTokens of Request.Characters): with the usage, what
	// QuotaPrompt calibrates from.
	PromptEstimate int64 `json:"prompt_estimate,omitempty"`
}

// Message is the answer as an assistant Message, to append to the
// conversation of the next request.
func (r Response) Message() Message {
	return Message{Role: RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls}
}

var (
	_ quota.Metered       = Response{}
	_ quota.CountedPrompt = Response{}
	_ price.Billed        = Response{}
)

// QuotaPrompt implements quota.CountedPrompt: the estimate of the part of
// the prompt QuotaUsage's input tokens count. That is the whole prompt's,
// but for an Anthropic call that read from the prompt cache, whose input
// tokens leave the cache reads out: its share of PromptEstimate is that of
// the tokens not read (input tokens less cache reads, over input tokens).
// Calibration so learns the tokenizer's ratio whatever the cache did, even
// when it read a prefix another conversation wrote (the estimate charged
// it) or missed one the estimate expected (the estimate charged it not).
// Zero when the request's size is not known.
func (r Response) QuotaPrompt() int64 {
	in := r.Usage.InputTokens
	if r.Provider != Anthropic || r.Usage.CacheReadTokens <= 0 || in <= 0 {
		return r.PromptEstimate
	}
	uncached := max(in-r.Usage.CacheReadTokens, 0)
	return int64(math.Ceil(float64(r.PromptEstimate) * float64(uncached) / float64(in)))
}

// QuotaBilled implements price.Billed: the usage as the provider bills it,
// cache reads and writes apart, which money budgets are settled at.
func (r Response) QuotaBilled() price.Usage { return r.Usage.billed() }

// billed is u as quota prices it.
func (u Usage) billed() price.Usage {
	return price.Usage{InputTokens: u.InputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, OutputTokens: u.OutputTokens}
}

// QuotaUsage implements quota.Metered: one request and the tokens the
// provider counted, which is the usage unless RateLimitTokens says
// otherwise.
//
// For Anthropic, whose input tokens per minute do not count cache reads,
// the input tokens are the prompt's less those read from the cache: what
// the estimate charged, and what calibration learns from.
func (r Response) QuotaUsage() quota.Cost {
	in := r.Usage.InputTokens
	if r.Provider == Anthropic {
		in -= r.Usage.CacheReadTokens
	}
	tokens := in + r.Usage.OutputTokens
	if r.RateLimitTokens > 0 {
		tokens = r.RateLimitTokens
	}
	return quota.Cost{
		Requests:     1,
		Tokens:       tokens,
		InputTokens:  in,
		OutputTokens: r.Usage.OutputTokens,
	}
}
