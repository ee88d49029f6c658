package quota_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestKeyString(t *testing.T) {
	for _, c := range []struct {
		key  quota.Key
		want string
	}{
		{quota.Key{Provider: "openai", Model: "gpt-4o"}, "openai/default/gpt-4o"},
		{quota.Key{Provider: "anthropic", Account: "org-1", Model: "claude"}, "anthropic/org-1/claude"},
		{quota.Key{Provider: "openai", Account: "a", Model: "m", Tenant: "acme"}, "openai/a/m/acme"},
	} {
		t.Run(c.want, func(t *testing.T) {
			require.Equal(t, c.want, c.key.String())
			require.NoError(t, c.key.Validate())
		})
	}
	k := quota.Key{Provider: "openai", Account: "a", Model: "m", Tenant: "acme"}
	require.Equal(t, quota.Key{Provider: "openai", Account: "a", Model: "m"}, k.WithoutTenant())
	require.Equal(t, "acme", k.Tenant, "WithoutTenant leaves its receiver alone")
}

func TestKeyValidate(t *testing.T) {
	ok := quota.Key{Provider: "openai", Account: "org", Model: "gpt-4o", Tenant: "acme"}
	for _, c := range []struct {
		name  string
		edit  func(*quota.Key)
		field string
	}{
		{"empty provider", func(k *quota.Key) { k.Provider = "" }, "key.provider"},
		{"empty model", func(k *quota.Key) { k.Model = "" }, "key.model"},
		{"slash in provider", func(k *quota.Key) { k.Provider = "open/ai" }, "key.provider"},
		{"brace in account", func(k *quota.Key) { k.Account = "{org}" }, "key.account"},
		{"space in model", func(k *quota.Key) { k.Model = "gpt 4o" }, "key.model"},
		{"control in tenant", func(k *quota.Key) { k.Tenant = "a\x00b" }, "key.tenant"},
		{"delete in tenant", func(k *quota.Key) { k.Tenant = "a\x7fb" }, "key.tenant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := ok
			c.edit(&k)
			requireInvalid(t, k.Validate(), c.field)
		})
	}
	require.NoError(t, ok.Validate())
	require.Error(t, quota.Key{}.Validate(), "the zero key is invalid")
}

func TestCost(t *testing.T) {
	c := quota.Cost{Requests: 1, Tokens: 1200, InputTokens: 200, OutputTokens: 1000}
	for _, a := range []struct {
		axis quota.Axis
		want int64
	}{
		{quota.Requests, 1}, {quota.RequestsPerDay, 1}, {quota.Tokens, 1200}, {quota.TokensPerDay, 1200},
		{quota.InputTokens, 200}, {quota.OutputTokens, 1000}, {quota.Concurrency, 0}, {0, 0},
	} {
		require.Equal(t, a.want, c.On(a.axis), "%s", a.axis)
	}
	require.Equal(t, "requests=1 tokens=1200 input_tokens=200 output_tokens=1000", c.String())
	require.Equal(t, "tokens=5", quota.Cost{Tokens: 5}.String())
	require.Equal(t, "free", quota.Cost{}.String())
	require.NoError(t, c.Validate())
	require.NoError(t, quota.Cost{}.Validate())

	for _, bad := range []struct {
		cost  quota.Cost
		field string
	}{
		{quota.Cost{Requests: -1}, "cost.requests"},
		{quota.Cost{Tokens: -1}, "cost.tokens"},
		{quota.Cost{InputTokens: -1}, "cost.input_tokens"},
		{quota.Cost{OutputTokens: -1}, "cost.output_tokens"},
	} {
		t.Run(bad.field, func(t *testing.T) { requireInvalid(t, bad.cost.Validate(), bad.field) })
	}
}

func TestPriorityString(t *testing.T) {
	require.Equal(t, "normal", quota.Normal.String())
	require.Equal(t, "low", quota.Low.String())
	require.Equal(t, quota.Normal, quota.Priority(0), "the zero priority is Normal")
}
