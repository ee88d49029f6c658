package activities

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
)

// Default base URLs, used when a ProviderConfig's BaseURL is empty.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1/"
	DefaultAnthropicBaseURL = "https://api.anthropic.com/"
	DefaultGeminiBaseURL    = "https://generativelanguage.googleapis.com/"
)

// ProviderConfig is how the worker reaches one provider. A zero
// ProviderConfig leaves the provider unconfigured: requests for it fail
// non-retryably with tollgate.ProviderNotConfigured.
type ProviderConfig struct {
	// APIKey authenticates the worker. Required when any other field is
	// set. It is sent only to BaseURL and never logged.
	APIKey string
	// BaseURL is the API's root: OpenAI's includes /v1 (e.g.
	// "http://127.0.0.1:8089/v1/"), Anthropic's and Gemini's do not (the
	// Gemini SDK adds /v1beta). Empty means the provider's public API.
	// Environment variables (OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
	// GOOGLE_GEMINI_BASE_URL) are not consulted.
	BaseURL string
	// HTTPClient sends the requests; nil means a client using
	// http.DefaultTransport. It is copied, not modified: its Transport is
	// wrapped to record responses into the call's classify.Recorder.
	HTTPClient *http.Client
	// Timeout bounds each HTTP request, a stream's whole body included;
	// zero means the SDK's default (none for OpenAI and Gemini beyond the
	// activity's context; Anthropic's computed non-streaming timeout). For
	// Anthropic a non-zero Timeout lifts the SDK's refusal of non-streaming
	// calls that may take over ten minutes, so Complete no longer streams
	// those unless Request.Stream asks.
	Timeout time.Duration
	// Organization (OpenAI only) is sent as OpenAI-Organization, for a key
	// that belongs to several organizations; empty sends none. The
	// OPENAI_ORG_ID environment variable is not consulted.
	Organization string
	// Project (OpenAI only) is sent as OpenAI-Project; empty sends none. The
	// OPENAI_PROJECT_ID environment variable is not consulted.
	Project string
}

func (p ProviderConfig) configured() bool {
	return p.APIKey != "" || p.BaseURL != "" || p.HTTPClient != nil || p.Timeout != 0 ||
		p.Organization != "" || p.Project != ""
}

// validate checks p as the config of provider name, reporting fields
// under prefix (e.g. "config.openai").
func (p ProviderConfig) validate(prefix, name string) error {
	if p.APIKey == "" {
		return invalid(prefix+".api_key", "", "is empty",
			"set the worker's API key for "+name+" (any non-empty key works against llmsim), or leave the whole provider config zero")
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return invalid(prefix+".base_url", p.BaseURL, "is not an absolute URL", `use e.g. "https://api.openai.com/v1/"`)
		}
	}
	if p.Timeout < 0 {
		return invalid(prefix+".timeout", p.Timeout.String(), "is negative", "use 0 for the SDK's default or a positive duration")
	}
	for _, f := range [...]struct{ field, value, example string }{
		{"organization", p.Organization, `"org-…"`},
		{"project", p.Project, `"proj_…"`},
	} {
		switch {
		case f.value == "":
		case name != OpenAI:
			return invalid(prefix+"."+f.field, f.value, "is set for "+name,
				"only OpenAI takes an organization or project; leave it empty (an Anthropic key belongs to one workspace, a Gemini key to one Google Cloud project)")
		case !validHeaderValue(f.value):
			return invalid(prefix+"."+f.field, f.value, "has spaces at its ends or control characters",
				"set the bare id, e.g. "+f.example)
		}
	}
	return nil
}

// validHeaderValue reports whether v can be sent as an HTTP header value as
// it is: no control characters and no spaces at its ends, which net/http
// would refuse (or trim) only when the request is sent.
func validHeaderValue(v string) bool {
	if strings.TrimSpace(v) != v {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// httpClient returns a copy of the configured client whose transport records
// every response into the request context's classify.Recorder.
func (p ProviderConfig) httpClient() *http.Client {
	var c http.Client
	if p.HTTPClient != nil {
		c = *p.HTTPClient
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = recordingTransport{next: next}
	return &c
}

// Config is the worker's configuration for the activities. A zero
// ProviderConfig leaves that provider unconfigured; at least one must be set.
type Config struct {
	OpenAI    ProviderConfig
	Anthropic ProviderConfig
	// Gemini is the Gemini API (API-key authentication, not Vertex AI).
	Gemini ProviderConfig
	// Accounts are further accounts of the providers, each reached with a
	// key and endpoint of its own: a request naming one (Request.Account,
	// as a pool member's calls do) is sent with that account's config, and
	// a request naming an account not listed with its provider's. Each
	// provider and account may be listed once; the provider needs no
	// config of its own.
	Accounts []AccountConfig
}

// AccountConfig is how the worker reaches one account of a provider
// (Config.Accounts).
type AccountConfig struct {
	// Provider is OpenAI, Anthropic or Gemini. Required.
	Provider string
	// Account is the name a request gives (Request.Account, a quota.Key's
	// Account). Required: the empty account is the provider's own config.
	Account string
	// Config is the account's key and endpoint; its APIKey is required.
	Config ProviderConfig
}

// Activities runs LLM calls. Build it with New and register it once per
// worker (Register). It is safe for concurrent use.
type Activities struct {
	// clients is the providers' own config's, for the default account and
	// any account not in accounts.
	clients
	accounts map[accountName]*clients
}

// accountName names one provider account of Config.Accounts.
type accountName struct{ provider, account string }

// clients are the SDK clients of one account of each provider; nil where
// it is not configured.
type clients struct {
	openai    *openai.ChatCompletionService
	anthropic *anthropic.Client
	gemini    *genai.Models
}

// New builds one SDK client per configured provider and account, with the
// SDK's retries off and a transport that records responses for the
// interceptor. The clients are configured by cfg alone: no SDK reads its
// environment variables (OPENAI_BASE_URL, OPENAI_ORG_ID,
// OPENAI_CUSTOM_HEADERS, ANTHROPIC_BASE_URL, GEMINI_API_KEY,
// GOOGLE_GEMINI_BASE_URL, …). It returns an *InvalidRequestError naming the
// bad field of cfg.
func New(cfg Config) (*Activities, error) {
	a := &Activities{}
	if !cfg.OpenAI.configured() && !cfg.Anthropic.configured() && !cfg.Gemini.configured() && len(cfg.Accounts) == 0 {
		return nil, invalid("config", "", "configures no provider", "set config.openai, config.anthropic or config.gemini (at least api_key)")
	}
	for _, pc := range [...]struct {
		name string
		p    ProviderConfig
	}{{OpenAI, cfg.OpenAI}, {Anthropic, cfg.Anthropic}, {Gemini, cfg.Gemini}} {
		if !pc.p.configured() {
			continue
		}
		if err := a.clients.add(pc.name, "config."+pc.name, pc.p); err != nil {
			return nil, err
		}
	}
	for i, ac := range cfg.Accounts {
		field := "config.accounts[" + strconv.Itoa(i) + "]"
		switch ac.Provider {
		case OpenAI, Anthropic, Gemini:
		default:
			return nil, invalid(field+".provider", ac.Provider, "is not a provider of this package", `use "openai", "anthropic" or "gemini"`)
		}
		id := accountName{ac.Provider, ac.Account}
		switch {
		case ac.Account == "":
			return nil, invalid(field+".account", "", "is empty", "name the account as requests do (Request.Account); the default account is config."+ac.Provider)
		case a.accounts[id] != nil:
			return nil, invalid(field+".account", ac.Account, "is listed twice for "+ac.Provider, "list each provider account once")
		}
		c := &clients{}
		if err := c.add(ac.Provider, field, ac.Config); err != nil {
			return nil, err
		}
		if a.accounts == nil {
			a.accounts = map[accountName]*clients{}
		}
		a.accounts[id] = c
	}
	return a, nil
}

// clientsFor returns the clients a request naming provider and account is sent
// with: the account's own (Config.Accounts), else the provider's.
func (a *Activities) clientsFor(provider, account string) *clients {
	if c := a.accounts[accountName{provider, account}]; c != nil {
		return c
	}
	return &a.clients
}

// add builds the client of provider from p, reporting bad fields under
// prefix.
func (c *clients) add(provider, prefix string, p ProviderConfig) error {
	if err := p.validate(prefix, provider); err != nil {
		return err
	}
	switch provider {
	case OpenAI:
		c.openai = newOpenAI(p)
	case Anthropic:
		c.anthropic = newAnthropic(p)
	case Gemini:
		m, err := newGemini(p)
		if err != nil {
			return err
		}
		c.gemini = m
	}
	return nil
}

func newOpenAI(p ProviderConfig) *openai.ChatCompletionService {
	base := p.BaseURL
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	opts := []openaioption.RequestOption{
		openaioption.WithAPIKey(p.APIKey),
		openaioption.WithBaseURL(base),
		openaioption.WithMaxRetries(0),
		openaioption.WithHTTPClient(p.httpClient()),
	}
	if p.Timeout > 0 {
		opts = append(opts, openaioption.WithRequestTimeout(p.Timeout))
	}
	if p.Organization != "" {
		opts = append(opts, openaioption.WithOrganization(p.Organization))
	}
	if p.Project != "" {
		opts = append(opts, openaioption.WithProject(p.Project))
	}
	// Not openai.NewClient: it applies the OPENAI_* environment variables
	// (base URL, keys, organization, project, custom headers) before these
	// options and has no public switch to skip them. The service alone
	// takes only the options given.
	c := openai.NewChatCompletionService(opts...)
	return &c
}

func newAnthropic(p ProviderConfig) *anthropic.Client {
	base := p.BaseURL
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	opts := []anthropicoption.RequestOption{
		anthropicoption.WithoutEnvironmentDefaults(),
		anthropicoption.WithAPIKey(p.APIKey),
		anthropicoption.WithBaseURL(base),
		anthropicoption.WithMaxRetries(0),
		anthropicoption.WithHTTPClient(p.httpClient()),
	}
	if p.Timeout > 0 {
		opts = append(opts, anthropicoption.WithRequestTimeout(p.Timeout))
	}
	c := anthropic.NewClient(opts...)
	return &c
}
