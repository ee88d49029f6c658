package worker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
)

const poolFile = `policies:
  - provider: anthropic
    model: claude-sonnet-4
    models: [claude-sonnet-4-*]
    limits: {requests_per_minute: 50}
  - provider: openai
    model: gpt-4o-mini
    limits: {requests_per_minute: 10}
pools:
  - provider: openai
    model: gpt-4o
    fallbacks: [openai/gpt-4o-mini]
    members:
      - account: east
        api_key_env: OPENAI_EAST_API_KEY
        base_url: https://east.example.com/v1/
        limits: {requests_per_minute: 500, tokens_per_minute: 30000}
      - account: west
        model: gpt-4o-2024-08-06
        api_key_env: OPENAI_WEST_API_KEY
        limits: {requests_per_minute: 300}
        headroom: 0.1
`

func TestParsePoliciesReadsPools(t *testing.T) {
	b, err := ParsePolicies([]byte(poolFile))
	require.NoError(t, err)
	members, ok := b.Pools.Members(quota.Key{Provider: "openai", Model: "gpt-4o", Tenant: "acme"})
	require.True(t, ok)
	require.Equal(t, []quota.Key{
		{Provider: "openai", Account: "east", Model: "gpt-4o", Tenant: "acme"},
		{Provider: "openai", Account: "west", Model: "gpt-4o-2024-08-06", Tenant: "acme"},
	}, members)
	_, p, ok := b.Policies.Lookup(members[1].WithoutTenant())
	require.True(t, ok)
	require.Equal(t, 0.1, p.Headroom)
	l, _ := p.Limit(quota.Requests)
	require.EqualValues(t, 300, l.Capacity)
	require.Equal(t, []Account{
		{Provider: "openai", Account: "east", APIKeyEnv: "OPENAI_EAST_API_KEY", BaseURL: "https://east.example.com/v1/"},
		{Provider: "openai", Account: "west", APIKeyEnv: "OPENAI_WEST_API_KEY"},
	}, b.Accounts)
	require.Equal(t, []string{"openai/gpt-4o-mini"}, b.Fallbacks["openai/gpt-4o"])
	bucket, _, ok := b.Policies.Lookup(quota.Key{Provider: "anthropic", Model: "claude-sonnet-4-20250514"})
	require.True(t, ok)
	require.Equal(t, quota.Key{Provider: "anthropic", Model: "claude-sonnet-4"}, bucket, "models share one budget")

	env := map[string]string{"OPENAI_EAST_API_KEY": "sk-east", "OPENAI_WEST_API_KEY": "sk-west"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	accts, err := b.accountConfigs(lookup)
	require.NoError(t, err)
	require.Equal(t, []activities.AccountConfig{
		{Provider: "openai", Account: "east", Config: activities.ProviderConfig{APIKey: "sk-east", BaseURL: "https://east.example.com/v1/"}},
		{Provider: "openai", Account: "west", Config: activities.ProviderConfig{APIKey: "sk-west"}},
	}, accts)
	delete(env, "OPENAI_WEST_API_KEY")
	_, err = b.accountConfigs(lookup)
	require.ErrorContains(t, err, `OPENAI_WEST_API_KEY is empty: set it to the API key of openai account "west"`)
}

// Each wrong field of a pool gives its own error, by its path.
func TestParsePoliciesRejectsEachBadPoolField(t *testing.T) {
	const head = "pools:\n  - provider: openai\n    model: gpt-4o\n    members:\n"
	const east = "      - {account: east, api_key_env: K_EAST, limits: {requests_per_minute: 5}}\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no provider", "pools:\n  - model: gpt-4o\n    members:\n" + east, `pools[0].provider "" is empty`},
		{"no members", "pools:\n  - provider: openai\n    model: gpt-4o\n", `pools[0].members "" is empty`},
		{"twice", head + east + "  - provider: openai\n    model: gpt-4o\n    members:\n      - {account: west, api_key_env: K, limits: {requests_per_minute: 5}}\n", `pools[1] "openai/default/gpt-4o" is listed twice`},
		{"no account", head + "      - {api_key_env: K, limits: {requests_per_minute: 5}}\n", `pools[0].members[0].account "" is empty`},
		{"no key env", head + "      - {account: east, limits: {requests_per_minute: 5}}\n", `pools[0].members[0].api_key_env "" is empty`},
		{"a key, not its name", head + "      - {account: east, api_key_env: sk-abc123, limits: {requests_per_minute: 5}}\n", `pools[0].members[0].api_key_env "sk-abc123" is not an environment variable's name`},
		{"bad base url", head + "      - {account: east, api_key_env: K, base_url: east.example.com, limits: {requests_per_minute: 5}}\n", `pools[0].members[0].base_url "east.example.com" is not an absolute URL`},
		{"no limits", head + "      - {account: east, api_key_env: K}\n", `pools[0].members[0].limits "" sets no limit`},
		{"other provider", head + "      - {provider: anthropic, account: east, api_key_env: K, limits: {requests_per_minute: 5}}\n", `pools[0].members[0].provider "anthropic" is set on a pool member`},
		{"tenant", head + "      - {tenant: acme, account: east, api_key_env: K, limits: {requests_per_minute: 5}}\n", `pools[0].members[0].tenant "acme" is set on a pool member`},
		{"member twice", head + east + east, `pools[0].members[1] "openai/east/gpt-4o" has a budget listed elsewhere in the file`},
		{"member in policies", "policies:\n  - {provider: openai, account: east, model: gpt-4o, limits: {requests_per_minute: 5}}\n" + head + east, `pools[0].members[0] "openai/east/gpt-4o" has a budget listed elsewhere`},
		{"pool with a policy", "policies:\n  - {provider: openai, model: gpt-4o, limits: {requests_per_minute: 5}}\n" + head + east, `pools[0] "openai/default/gpt-4o" has a policy of its own`},
		{"one account, two keys", head + east + "  - provider: openai\n    model: gpt-4o-mini\n    members:\n      - {account: east, api_key_env: K_OTHER, limits: {requests_per_minute: 5}}\n", `pools[1].members[0] "openai/east" names an account another member reaches with another api_key_env`},
		{"fallback without a policy", head + east + "    fallbacks: [openai/o3]\n", `pools[0].fallbacks[0] "openai/o3" has no policy of its own`},
		{"unknown field", head + "      - {account: east, api_key: sk-abc, limits: {requests_per_minute: 5}}\n", "api_key"},
		{"shared model twice", "policies:\n  - {provider: anthropic, model: a, models: [c], limits: {requests_per_minute: 5}}\n  - {provider: anthropic, model: b, models: [c], limits: {requests_per_minute: 5}}\n", `policies[1].models[0] "c" is also shared by anthropic/default/a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicies([]byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
			var pe *PolicyError
			if errors.As(err, &pe) {
				require.NotEmpty(t, pe.Fix, "every error says how to fix it")
			}
		})
	}
}
