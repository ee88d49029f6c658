package pool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
)

func TestNewErrors(t *testing.T) {
	lim := quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10)}}
	east := quota.Key{Provider: "openai", Account: "east", Model: "gpt-4o"}
	west := quota.Key{Provider: "openai", Account: "west", Model: "gpt-4o"}
	alias := quota.Key{Provider: "openai", Account: "east", Model: "gpt-4o-2024"}
	claude := quota.Key{Provider: "anthropic", Account: "w1", Model: "claude"}
	shared := lim
	shared.Models = []string{"gpt-4o-2024"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{east: shared, west: lim, claude: lim})
	require.NoError(t, err)
	key := quota.Key{Provider: "openai", Model: "gpt-4o"}
	for _, c := range []struct {
		name  string
		pools map[quota.Key][]quota.Key
		field string
	}{
		{"empty", map[quota.Key][]quota.Key{key: nil}, "members"},
		{"tenant pool", map[quota.Key][]quota.Key{{Provider: "openai", Model: "gpt-4o", Tenant: "acme"}: {east}}, "key.tenant"},
		{"pool with a policy", map[quota.Key][]quota.Key{east: {west}}, "key"},
		{"member without policy", map[quota.Key][]quota.Key{key: {east, {Provider: "openai", Account: "north", Model: "gpt-4o"}}}, "members[1]"},
		{"other provider", map[quota.Key][]quota.Key{key: {east, claude}}, "members[1].provider"},
		{"one budget twice", map[quota.Key][]quota.Key{key: {east, alias}}, "members[1]"},
		{"bad member", map[quota.Key][]quota.Key{key: {{Provider: "openai", Model: ""}}}, "members[0].model"},
		{"member tenant", map[quota.Key][]quota.Key{key: {{Provider: "openai", Account: "east", Model: "gpt-4o", Tenant: "x"}}}, "members[0].tenant"},
		{"nested pool", map[quota.Key][]quota.Key{key: {east}, {Provider: "openai", Model: "p2"}: {key}}, "members[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := pool.New(ps, c.pools)
			var inv *quota.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, c.field, inv.Field, "%v", err)
		})
	}
	pools, err := pool.New(ps, map[quota.Key][]quota.Key{key: {west, east}})
	require.NoError(t, err)
	members, ok := pools.Members(quota.Key{Provider: "openai", Model: "gpt-4o", Tenant: "acme"})
	require.True(t, ok)
	require.Equal(t, []quota.Key{{Provider: "openai", Account: "west", Model: "gpt-4o", Tenant: "acme"}, {Provider: "openai", Account: "east", Model: "gpt-4o", Tenant: "acme"}}, members)
	_, ok = pools.Members(west)
	require.False(t, ok)
	require.Equal(t, []quota.Key{key}, pools.Keys())
}

func TestSharedModels(t *testing.T) {
	lim := quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute)}}
	sonnet := quota.Key{Provider: "anthropic", Model: "claude-sonnet"}
	haiku := quota.Key{Provider: "anthropic", Model: "claude-haiku"}
	family := quota.Key{Provider: "anthropic", Model: "claude"}
	with := func(p quota.Policy, models ...string) quota.Policy { p.Models = models; return p }
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		sonnet: with(lim, "claude-sonnet-4-*", "claude-3-5-sonnet-20241022"),
		haiku:  lim,
		family: with(lim, "claude-*"),
	})
	require.NoError(t, err)
	for model, want := range map[string]quota.Key{
		"claude-sonnet-4-20250514":   sonnet, // the longer pattern
		"claude-3-5-sonnet-20241022": sonnet, // exact
		"claude-haiku":               haiku,  // a policy of its own beats the family
		"claude-opus-4":              family,
	} {
		b, _, ok := ps.Lookup(quota.Key{Provider: "anthropic", Model: model, Tenant: "t"})
		require.True(t, ok, model)
		require.Equal(t, want, b, model)
	}
	_, _, ok := ps.Lookup(quota.Key{Provider: "anthropic", Account: "other", Model: "claude-opus-4"})
	require.False(t, ok, "another account shares nothing")
	a, _, ok := ps.Account(quota.Key{Provider: "anthropic", Model: "claude-opus-4", Tenant: "t"})
	require.True(t, ok)
	require.Equal(t, family, a)

	for _, c := range []struct {
		name     string
		policies map[quota.Key]quota.Policy
		field    string
	}{
		{"empty", map[quota.Key]quota.Policy{sonnet: with(lim, "")}, "models[0]"},
		{"star inside", map[quota.Key]quota.Policy{sonnet: with(lim, "a*b")}, "models[0]"},
		{"slash", map[quota.Key]quota.Policy{sonnet: with(lim, "a/b")}, "models[0]"},
		{"own model", map[quota.Key]quota.Policy{sonnet: with(lim, "claude-sonnet")}, "models[0]"},
		{"has its own", map[quota.Key]quota.Policy{sonnet: with(lim, "x", "claude-haiku"), haiku: lim}, "models[1]"},
		{"twice", map[quota.Key]quota.Policy{sonnet: with(lim, "x"), haiku: with(lim, "x")}, "models[0]"},
		{"on a tenant", map[quota.Key]quota.Policy{{Provider: "anthropic", Model: "m", Tenant: "t"}: with(lim, "x")}, "models"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := quota.NewPolicies(c.policies)
			var inv *quota.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Equal(t, c.field, inv.Field, "%v", err)
		})
	}
}
