package llmsim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// The providers Sim speaks for.
const (
	// OpenAI is served at POST /v1/chat/completions.
	OpenAI = "openai"
	// Anthropic is served at POST /v1/messages.
	Anthropic = "anthropic"
	// Gemini is served at POST /v1beta/models/{model}:generateContent.
	Gemini = "gemini"
)

// Config describes what a Sim serves and how it limits. It is a value; zero
// fields mean what their comments say. Load one from a file with LoadConfig.
type Config struct {
	// Models lists the models served, with their limits. A call for a model
	// not listed gets the provider's 404. At least one is required.
	Models []Model `json:"models" yaml:"models"`
	// Accounts lists the API keys accepted and the account each belongs to.
	// Empty means any non-empty key is accepted, as account "default", with
	// no spend cap.
	Accounts []Account `json:"accounts" yaml:"accounts"`
	// Overload makes a fraction of calls fail as overloaded. Zero: never.
	Overload Overload `json:"overload" yaml:"overload"`
	// Latency delays every successful answer. Zero: answer at once.
	Latency Latency `json:"latency" yaml:"latency"`
	// Faults are injected from the start, as if passed to Sim.Inject.
	Faults []Fault `json:"faults" yaml:"faults"`
	// Seed seeds the random source used for overload and latency draws, so
	// runs repeat. Zero is a valid seed.
	Seed uint64 `json:"seed" yaml:"seed"`
	// RecordCharges keeps what the limiter charged every admitted call,
	// for Sim.Charges (a benchmark's goodput, see Ideal). Off by default:
	// the record grows with every call.
	RecordCharges bool `json:"record_charges" yaml:"record_charges"`
}

// Model is one model a Sim serves and its limits, which apply to each
// account separately (as providers limit per organisation). A zero limit
// means unlimited on that axis.
type Model struct {
	// Provider is OpenAI, Anthropic or Gemini. Required.
	Provider string `json:"provider" yaml:"provider"`
	// Name is the model id callers send, e.g. "gpt-4o". Required.
	Name string `json:"name" yaml:"name"`
	// RequestsPerMinute is the request bucket's capacity, refilled
	// continuously over a minute.
	RequestsPerMinute int64 `json:"requests_per_minute" yaml:"requests_per_minute"`
	// TokensPerMinute is the token bucket (OpenAI and Gemini): OpenAI
	// charges max(max_tokens, ceil(characters/4)) per call, Gemini the
	// prompt's tokens alone (its TPM counts input tokens).
	TokensPerMinute int64 `json:"tokens_per_minute" yaml:"tokens_per_minute"`
	// InputTokensPerMinute is the input-token bucket (Anthropic only),
	// charged ceil(characters/4) per call.
	InputTokensPerMinute int64 `json:"input_tokens_per_minute" yaml:"input_tokens_per_minute"`
	// OutputTokensPerMinute is the output-token bucket (Anthropic only),
	// charged max_tokens per call.
	OutputTokensPerMinute int64 `json:"output_tokens_per_minute" yaml:"output_tokens_per_minute"`
	// RequestsPerDay is a window of requests that resets at midnight UTC
	// (OpenAI, Anthropic) or at midnight America/Los_Angeles (Gemini, whose
	// per-day quotas reset at midnight Pacific time).
	RequestsPerDay int64 `json:"requests_per_day" yaml:"requests_per_day"`
	// Density is how many tokens this model's tokenizer makes of what
	// characters/4 estimates: the simulator counts a text of n characters as
	// ceil(Density × n/4) tokens, in its limits and in the usage it reports.
	// Real tokenizers differ from characters/4 (English prose by 1.1–1.3×,
	// code, JSON and other scripts by up to 4×), and a governor must learn
	// that rather than assume it. Zero means 1.
	Density float64 `json:"density" yaml:"density"`
	// ContextWindow, in tokens, bounds the prompt's tokens + max_tokens; a
	// larger call gets the provider's 400 "context too long" error.
	ContextWindow int64 `json:"context_window" yaml:"context_window"`
	// Period is the window the per-minute limits refill over: each bucket
	// holds its limit and earns it back, continuously, over Period. Zero
	// means one minute, as providers do; a benchmark or demo sets e.g. 1s to
	// compress time (RequestsPerMinute 60 with Period 1s admits 60 calls a
	// second). Reset headers and retry-after follow it. RequestsPerDay is
	// not affected.
	Period time.Duration `json:"period" yaml:"period"`
	// Window is the shorter period over which the provider also enforces
	// each per-minute limit, as OpenAI and Anthropic document ("may be
	// enforced over shorter periods": 60 RPM as 1 request a second) and
	// Azure OpenAI does over 1 s or 10 s. Each of the requests, tokens,
	// input-token and output-token limits is then kept by two buckets that
	// must both admit a call: the period bucket (the whole limit, as without
	// a window) and a window bucket holding limit × Window/Period, refilled
	// continuously at limit/Period. A window bucket admits any call once it
	// holds min(cost, its capacity), a request costing 1, and may go into
	// debt, so a call larger than the window's share is served from a full
	// window and the next waits until the debt is repaid: the long-run rate
	// is the limit. Retry-after follows whichever bucket waits longer; the
	// rate-limit headers report the period buckets, as providers do. Zero
	// means Period: one bucket holding the whole limit. Not negative, not
	// longer than Period (whose zero is one minute).
	Window time.Duration `json:"window" yaml:"window"`
	// WindowShape is how the provider counts a limit over Window:
	// ShapeBucket (the default, described above), ShapeFixed (counters
	// reset on clock boundaries of Window) or ShapeSliding (a log of the
	// last Window's calls). Providers do not say which they run; a client
	// that keeps to the limit must survive all three. Empty means
	// ShapeBucket; ignored without a Window.
	WindowShape string `json:"window_shape" yaml:"window_shape"`
	// CacheTTL is how long a cached prompt prefix lives after it was last
	// written or read (see the prompt cache in cache.go); zero means
	// DefaultCacheTTL.
	CacheTTL time.Duration `json:"cache_ttl" yaml:"cache_ttl"`
	// CacheMinTokens is the shortest prefix, in tokens, the model caches;
	// zero means DefaultCacheMinTokens.
	CacheMinTokens int64 `json:"cache_min_tokens" yaml:"cache_min_tokens"`
}

// Account is an API key and the account it authenticates as.
type Account struct {
	// Name identifies the account in limits and errors. Required, unique.
	Name string `json:"name" yaml:"name"`
	// APIKey is the key callers send (OpenAI: Authorization: Bearer;
	// Anthropic: x-api-key). Required, unique.
	APIKey string `json:"api_key" yaml:"api_key"`
	// SpendCapTokens, when positive, is how many tokens (input plus output)
	// the account may use; once it has used that many, every call gets the
	// provider's spend-cap error. Zero means no cap.
	SpendCapTokens int64 `json:"spend_cap_tokens" yaml:"spend_cap_tokens"`
}

// Overload makes calls fail as overloaded at random.
type Overload struct {
	// Probability, in [0, 1], that a call (that passed auth and the spend
	// cap) is refused as overloaded.
	Probability float64 `json:"probability" yaml:"probability"`
	// Status overrides the status sent: 0 means 529 for Anthropic and 503 for
	// OpenAI.
	Status int `json:"status" yaml:"status"`
	// RetryAfter, when positive, is sent as retry-after (whole seconds,
	// rounded up). Zero sends none.
	RetryAfter time.Duration `json:"retry_after" yaml:"retry_after"`
}

// ConfigError reports a bad field of a Config: which field, the value given,
// what is wrong and how to fix it.
type ConfigError struct {
	Field   string
	Value   string
	Problem string
	Fix     string
}

// Error returns e.g. `llmsim: config models[0].name "" is empty: set …`.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("llmsim: config %s %q %s: %s", e.Field, e.Value, e.Problem, e.Fix)
}

func configErr(field, value, problem, fix string) error {
	return &ConfigError{Field: field, Value: value, Problem: problem, Fix: fix}
}

// Validate reports a *ConfigError naming the first bad field of c, or nil.
func (c Config) Validate() error {
	if len(c.Models) == 0 {
		return configErr("models", "", "is empty", "list at least one model with its provider and name")
	}
	seen := make(map[string]bool)
	for i, m := range c.Models {
		if err := m.validate(fmt.Sprintf("models[%d]", i)); err != nil {
			return err
		}
		id := m.Provider + "/" + m.Name
		if seen[id] {
			return configErr(fmt.Sprintf("models[%d].name", i), m.Name, "is listed twice for "+m.Provider, "keep one entry per model")
		}
		seen[id] = true
	}
	names, keys := make(map[string]bool), make(map[string]bool)
	for i, a := range c.Accounts {
		f := fmt.Sprintf("accounts[%d]", i)
		switch {
		case a.Name == "":
			return configErr(f+".name", "", "is empty", `name the account, e.g. "team-a"`)
		case names[a.Name]:
			return configErr(f+".name", a.Name, "is used twice", "give each account its own name")
		case a.APIKey == "":
			return configErr(f+".api_key", "", "is empty", "set the key callers will send")
		case keys[a.APIKey]:
			return configErr(f+".api_key", "(redacted)", "is used by two accounts", "give each account its own key")
		case a.SpendCapTokens < 0:
			return configErr(f+".spend_cap_tokens", strconv.FormatInt(a.SpendCapTokens, 10), "is negative", "use 0 for no cap or a positive number of tokens")
		}
		names[a.Name], keys[a.APIKey] = true, true
	}
	o := c.Overload
	if !(o.Probability >= 0 && o.Probability <= 1) {
		return configErr("overload.probability", strconv.FormatFloat(o.Probability, 'g', -1, 64), "must be in [0, 1]", "use a fraction such as 0.05")
	}
	if o.Status != 0 && (o.Status < 500 || o.Status > 599) {
		return configErr("overload.status", strconv.Itoa(o.Status), "is not a 5xx status", "use 0 for the provider's own, or e.g. 503 or 529")
	}
	if o.RetryAfter < 0 {
		return configErr("overload.retry_after", o.RetryAfter.String(), "is negative", "use 0 to send none or a positive duration such as 2s")
	}
	if err := c.Latency.validate("latency"); err != nil {
		return err
	}
	for i, f := range c.Faults {
		if err := f.validate(fmt.Sprintf("faults[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// period is the time the per-minute limits refill over: Period, or one
// minute when it is zero.
func (m Model) period() time.Duration {
	if m.Period == 0 {
		return time.Minute
	}
	return m.Period
}

// MaxDensity is the largest Model.Density accepted.
const MaxDensity = 8

// tokens is how many tokens the model counts in a text of chars characters:
// ceil(Density × chars/4).
func (m Model) tokens(chars int64) int64 {
	if chars <= 0 {
		return 0
	}
	d := m.Density
	if d == 0 {
		d = 1
	}
	return int64(math.Ceil(d * float64(chars) / 4))
}

// chars is how many characters make at most n of the model's tokens: the
// inverse of tokens, rounded down.
func (m Model) chars(n int64) int64 {
	d := m.Density
	if d == 0 {
		d = 1
	}
	c := int64(math.Floor(float64(n) * 4 / d))
	for c > 0 && m.tokens(c) > n {
		c--
	}
	return c
}

func (m Model) validate(f string) error {
	switch m.Provider {
	case OpenAI, Anthropic, Gemini:
	case "":
		return configErr(f+".provider", "", "is empty", `set "openai", "anthropic" or "gemini"`)
	default:
		return configErr(f+".provider", m.Provider, "is not a known provider", `use "openai", "anthropic" or "gemini"`)
	}
	if m.Name == "" {
		return configErr(f+".name", "", "is empty", `set the model id callers send, e.g. "gpt-4o"`)
	}
	for _, l := range [...]struct {
		name string
		v    int64
	}{
		{"requests_per_minute", m.RequestsPerMinute}, {"tokens_per_minute", m.TokensPerMinute},
		{"input_tokens_per_minute", m.InputTokensPerMinute}, {"output_tokens_per_minute", m.OutputTokensPerMinute},
		{"requests_per_day", m.RequestsPerDay}, {"context_window", m.ContextWindow},
	} {
		if l.v < 0 {
			return configErr(f+"."+l.name, strconv.FormatInt(l.v, 10), "is negative", "use 0 for unlimited or a positive number")
		}
	}
	if m.Period < 0 {
		return configErr(f+".period", m.Period.String(), "is negative", "use 0 for one minute or a positive duration such as 1s")
	}
	if m.CacheTTL < 0 {
		return configErr(f+".cache_ttl", m.CacheTTL.String(), "is negative", "use 0 for 5m or a positive duration")
	}
	if m.CacheMinTokens < 0 {
		return configErr(f+".cache_min_tokens", strconv.FormatInt(m.CacheMinTokens, 10), "is negative", "use 0 for 1024 or a positive number of tokens")
	}
	if m.Window < 0 {
		return configErr(f+".window", m.Window.String(), "is negative", "use 0 to enforce each limit over its whole period, or a positive duration such as 1s")
	}
	switch m.WindowShape {
	case "", ShapeBucket, ShapeFixed, ShapeSliding:
	default:
		return configErr(f+".window_shape", m.WindowShape, "is not a window shape", `use "bucket", "fixed" or "sliding"`)
	}
	if m.Window > m.period() {
		return configErr(f+".window", m.Window.String(), "is longer than the period ("+m.period().String()+")",
			"use a window no longer than the period, e.g. 1s to enforce a per-minute limit per second, or 0 for the whole period")
	}
	if d := m.Density; math.IsNaN(d) || d < 0 || d > MaxDensity {
		return configErr(f+".density", strconv.FormatFloat(d, 'g', -1, 64), "is out of range",
			fmt.Sprintf("use a ratio in (0, %g], e.g. 1.3 for a tokenizer that counts 30%% more than characters/4, or 0 for 1", float64(MaxDensity)))
	}
	if m.Provider == OpenAI && m.InputTokensPerMinute+m.OutputTokensPerMinute != 0 {
		return configErr(f+".input_tokens_per_minute", strconv.FormatInt(m.InputTokensPerMinute, 10),
			"is set for an OpenAI model", "OpenAI meters tokens_per_minute only; set that instead")
	}
	if m.Provider == Gemini && m.InputTokensPerMinute+m.OutputTokensPerMinute != 0 {
		return configErr(f+".input_tokens_per_minute", strconv.FormatInt(m.InputTokensPerMinute, 10),
			"is set for a Gemini model", "Gemini's tokens per minute count input tokens; set tokens_per_minute instead")
	}
	if m.Provider == Anthropic && m.TokensPerMinute != 0 {
		return configErr(f+".tokens_per_minute", strconv.FormatInt(m.TokensPerMinute, 10),
			"is set for an Anthropic model", "Anthropic meters input_tokens_per_minute and output_tokens_per_minute; set those instead")
	}
	return nil
}

// LoadConfig reads a Config from a YAML or JSON file (JSON is read as YAML,
// of which it is a subset). Durations are strings such as "20ms". Unknown
// fields are errors; the result is validated.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("llmsim: read config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a Config from YAML or JSON and validates it. Errors
// name the offending field (a *ConfigError, or the decoder's message with the
// line and field).
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("llmsim: config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
