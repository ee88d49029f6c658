package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// headerLog records the headers of every request a handler receives.
type headerLog struct {
	mu   sync.Mutex
	seen []http.Header
}

func (l *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Header.Clone())
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (l *headerLog) all() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.seen...)
}

// setProviderEnv sets every environment variable the OpenAI and Anthropic
// SDKs read by default, pointing the base URLs at decoy, with values that
// must never reach the wire.
func setProviderEnv(t *testing.T, decoy string) {
	t.Helper()
	for k, v := range map[string]string{
		"OPENAI_BASE_URL":          decoy + "/v1/",
		"OPENAI_API_KEY":           "sk-from-env-openai",
		"OPENAI_ADMIN_KEY":         "sk-admin-from-env",
		"OPENAI_ORG_ID":            "org-from-env",
		"OPENAI_PROJECT_ID":        "proj_from_env",
		"OPENAI_CUSTOM_HEADERS":    "X-From-Env: openai\nX-Also-From-Env: openai",
		"ANTHROPIC_BASE_URL":       decoy,
		"ANTHROPIC_API_KEY":        "sk-ant-from-env",
		"ANTHROPIC_AUTH_TOKEN":     "token-from-env",
		"ANTHROPIC_CUSTOM_HEADERS": "X-From-Env: anthropic",
	} {
		t.Setenv(k, v)
	}
}

// envFixture is an llmsim server that logs request headers, a decoy server
// the environment points at, and the environment set.
type envFixture struct {
	srv, decoy         *httptest.Server
	headers, decoyHits *headerLog
}

func newEnvFixture(t *testing.T) *envFixture {
	t.Helper()
	sim, err := llmsim.New(llmsim.Config{
		Models: []llmsim.Model{
			{Provider: llmsim.OpenAI, Name: "gpt-4o"},
			{Provider: llmsim.Anthropic, Name: "claude-haiku-4-5"},
		},
		Accounts: []llmsim.Account{{Name: "acct", APIKey: testKey}},
	})
	require.NoError(t, err)
	f := &envFixture{headers: &headerLog{}, decoyHits: &headerLog{}}
	f.srv = httptest.NewServer(f.headers.wrap(sim))
	t.Cleanup(f.srv.Close)
	f.decoy = httptest.NewServer(f.decoyHits.wrap(http.NotFoundHandler()))
	t.Cleanup(f.decoy.Close)
	setProviderEnv(t, f.decoy.URL)
	return f
}

func TestClientsIgnoreTheEnvironment(t *testing.T) {
	f := newEnvFixture(t)
	acts, err := New(Config{
		OpenAI:    ProviderConfig{APIKey: testKey, BaseURL: f.srv.URL + "/v1/"},
		Anthropic: ProviderConfig{APIKey: testKey, BaseURL: f.srv.URL},
	})
	require.NoError(t, err)
	for _, req := range []Request{chat(OpenAI, "gpt-4o", "hi"), chat(Anthropic, "claude-haiku-4-5", "hi")} {
		_, err := acts.Complete(context.Background(), req)
		require.NoError(t, err, "%s: the config's key reached the configured server", req.Provider)
	}

	require.Empty(t, f.decoyHits.all(), "no request followed OPENAI_BASE_URL or ANTHROPIC_BASE_URL")
	// The env's values all contain "from-env" or "from_env", the config's none.
	seen := f.headers.all()
	require.Len(t, seen, 2)
	for i, h := range seen {
		require.Equal(t, "Bearer "+testKey, h.Get("Authorization"), "request %d: the config's key, not the environment's", i)
		for _, name := range []string{"OpenAI-Organization", "OpenAI-Project", "X-From-Env", "X-Also-From-Env"} {
			require.Empty(t, h.Values(name), "request %d: %s", i, name)
		}
		for name, values := range h {
			for _, v := range values {
				require.NotContains(t, v, "from-env", "request %d: header %s", i, name)
				require.NotContains(t, v, "from_env", "request %d: header %s", i, name)
			}
		}
	}
}

func TestOpenAIOrganizationAndProjectComeFromConfig(t *testing.T) {
	f := newEnvFixture(t)
	acts, err := New(Config{OpenAI: ProviderConfig{
		APIKey: testKey, BaseURL: f.srv.URL + "/v1/", Organization: "org-config", Project: "proj_config",
	}})
	require.NoError(t, err)
	_, err = acts.Complete(context.Background(), chat(OpenAI, "gpt-4o", "hi"))
	require.NoError(t, err)

	seen := f.headers.all()
	require.Len(t, seen, 1)
	require.Equal(t, []string{"org-config"}, seen[0].Values("OpenAI-Organization"))
	require.Equal(t, []string{"proj_config"}, seen[0].Values("OpenAI-Project"))
	require.Empty(t, seen[0].Values("X-From-Env"))
	require.Empty(t, f.decoyHits.all())
}

func TestNewValidatesOrganizationAndProject(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		field   string
		problem string
	}{
		{"organization for anthropic", Config{Anthropic: ProviderConfig{APIKey: "k", Organization: "org-1"}},
			"config.anthropic.organization", "is set for anthropic"},
		{"project for anthropic", Config{Anthropic: ProviderConfig{APIKey: "k", Project: "proj_1"}},
			"config.anthropic.project", "is set for anthropic"},
		{"organization with a newline", Config{OpenAI: ProviderConfig{APIKey: "k", Organization: "org-1\n"}},
			"config.openai.organization", "has spaces at its ends or control characters"},
		{"project with a control character", Config{OpenAI: ProviderConfig{APIKey: "k", Project: "proj\x001"}},
			"config.openai.project", "has spaces at its ends or control characters"},
		{"organization without a key", Config{OpenAI: ProviderConfig{Organization: "org-1"}},
			"config.openai.api_key", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			var ie *InvalidRequestError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
			require.Equal(t, tc.problem, ie.Problem)
			require.NotEmpty(t, ie.Fix)
		})
	}
	_, err := New(Config{OpenAI: ProviderConfig{APIKey: "k", Organization: "org-1", Project: "proj_1", Timeout: time.Second}})
	require.NoError(t, err)
}
