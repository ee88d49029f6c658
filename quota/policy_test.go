package quota_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestPolicyValidate(t *testing.T) {
	rpm := quota.PerMinute(quota.Requests, 100)
	for _, c := range []struct {
		name   string
		policy quota.Policy
		field  string
	}{
		{"bad limit", quota.Policy{Limits: []quota.Limit{rpm, quota.PerMinute(quota.Tokens, 0)}}, "limit.tokens.capacity"},
		{"duplicate axis", quota.Policy{Limits: []quota.Limit{rpm, quota.PerSecond(quota.Requests, 2)}}, "limit.requests"},
		{"negative headroom", quota.Policy{Limits: []quota.Limit{rpm}, Headroom: -0.1}, "headroom"},
		{"NaN headroom", quota.Policy{Limits: []quota.Limit{rpm}, Headroom: math.NaN()}, "headroom"},
		{"whole headroom", quota.Policy{Limits: []quota.Limit{rpm}, Headroom: 1}, "headroom"},
		{"headroom leaving nothing", quota.Policy{Limits: []quota.Limit{quota.Concurrent(1)}, Headroom: 0.5}, "headroom"},
		{"negative reserve", quota.Policy{Limits: []quota.Limit{rpm}, PriorityReserve: -0.5}, "priority_reserve"},
		{"NaN reserve", quota.Policy{Limits: []quota.Limit{rpm}, PriorityReserve: math.NaN()}, "priority_reserve"},
		{"whole reserve", quota.Policy{Limits: []quota.Limit{rpm}, PriorityReserve: 1}, "priority_reserve"},
		{"negative max wait", quota.Policy{Limits: []quota.Limit{rpm}, MaxWait: -time.Second}, "max_wait"},
		{"negative lease ttl", quota.Policy{Limits: []quota.Limit{rpm}, LeaseTTL: -time.Second}, "lease_ttl"},
	} {
		t.Run(c.name, func(t *testing.T) { requireInvalid(t, c.policy.Validate(), c.field) })
	}
	require.NoError(t, quota.Policy{}.Validate(), "a policy without limits admits everything")
	require.NoError(t, quota.Policy{Limits: []quota.Limit{rpm, quota.PerDay(quota.Requests, 1000, nil), quota.Concurrent(4)},
		Headroom: 0.1, PriorityReserve: 0.2, MaxWait: time.Minute, LeaseTTL: time.Minute}.Validate())
}

func TestPolicyDerived(t *testing.T) {
	p := quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Tokens, 1000)}, Headroom: 0.15, PriorityReserve: 0.2}
	l, ok := p.Limit(quota.Tokens)
	require.True(t, ok)
	require.Equal(t, quota.PerMinute(quota.Tokens, 1000), l)
	_, ok = p.Limit(quota.Requests)
	require.False(t, ok)

	require.Equal(t, int64(850), p.Effective(1000))
	require.Equal(t, int64(8), p.Effective(10), "rounded down")

	d := quota.Policy{}.WithDefaults()
	require.Equal(t, quota.DefaultMaxWait, d.MaxWait)
	require.Equal(t, quota.DefaultLeaseTTL, d.LeaseTTL)
	set := quota.Policy{MaxWait: time.Second, LeaseTTL: time.Minute}.WithDefaults()
	require.Equal(t, time.Second, set.MaxWait)
	require.Equal(t, time.Minute, set.LeaseTTL)
}

// TestEffective: headroom is the decimal it prints as, so a product that is
// whole in decimal comes out whole, never a unit short to float error.
func TestEffective(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity int64
		headroom float64
		want     int64
	}{
		{"no headroom", 90000, 0, 90000},
		{"exact tenth", 100, 0.1, 90},
		{"exact thirty percent", 90000, 0.3, 63000},
		{"exact ninety percent", 10, 0.9, 1},
		{"exact fifteen percent", 1000, 0.15, 850},
		{"rounded down", 10, 0.15, 8},
		{"half of one", 1, 0.5, 0},
		{"a third", 3, 1.0 / 3, 2},
		{"a third of a large capacity", 3_000_000_000, 1.0 / 3, 2_000_000_000},
		{"largest capacity", 1 << 50, 0.1, 1013309916158361},
		{"tiny headroom", 1 << 50, 1e-25, 1<<50 - 1},
		{"zero capacity", 0, 0.3, 0},
		{"negative capacity", -1, 0.3, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, quota.Policy{Headroom: c.headroom}.Effective(c.capacity))
		})
	}
}

func TestPolicies(t *testing.T) {
	account := quota.Key{Provider: "openai", Account: "org", Model: "gpt-4o"}
	vip := quota.Key{Provider: "openai", Account: "org", Model: "gpt-4o", Tenant: "vip"}
	other := quota.Key{Provider: "openai", Account: "org", Model: "gpt-4o", Tenant: "other"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		account: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 100)}},
		vip:     {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10)}, MaxWait: time.Second},
	})
	require.NoError(t, err)
	require.Equal(t, []quota.Key{account, vip}, ps.Keys())

	for _, c := range []struct {
		name   string
		key    quota.Key
		bucket quota.Key
		ok     bool
	}{
		{"account", account, account, true},
		{"tenant with a policy", vip, vip, true},
		{"tenant without one", other, account, true},
		{"unknown", quota.Key{Provider: "anthropic", Model: "claude"}, quota.Key{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bucket, p, ok := ps.Lookup(c.key)
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.bucket, bucket)
			if ok {
				require.Equal(t, quota.DefaultLeaseTTL, p.LeaseTTL, "defaults filled in")
			}
		})
	}
	_, p, _ := ps.Lookup(vip)
	require.Equal(t, time.Second, p.MaxWait)

	_, err = quota.NewPolicies(map[quota.Key]quota.Policy{{Provider: "openai"}: {}})
	requireInvalid(t, err, "key.model")
	_, err = quota.NewPolicies(map[quota.Key]quota.Policy{account: {Headroom: 2}})
	requireInvalid(t, err, "headroom")
	require.ErrorContains(t, err, account.String(), "the error names the key")

	var none quota.Policies
	_, _, ok := none.Lookup(account)
	require.False(t, ok, "the zero Policies holds none")
	require.Empty(t, none.Keys())
}

func TestPolicyWeights(t *testing.T) {
	rpm := []quota.Limit{quota.PerMinute(quota.Requests, 100)}
	for _, c := range []struct {
		name   string
		policy quota.Policy
		field  string
	}{
		{"negative weight", quota.Policy{Limits: rpm, Weight: -1}, "weight"},
		{"NaN weight", quota.Policy{Limits: rpm, Weight: math.NaN()}, "weight"},
		{"infinite weight", quota.Policy{Limits: rpm, Weight: math.Inf(1)}, "weight"},
		{"tiny weight", quota.Policy{Limits: rpm, Weight: 1e-9}, "weight"},
		{"huge weight", quota.Policy{Limits: rpm, Weight: 1e9}, "weight"},
		{"zero tenant weight", quota.Policy{Limits: rpm, TenantWeights: map[string]float64{"a": 0}}, "tenant_weights.a"},
		{"negative tenant weight", quota.Policy{Limits: rpm, TenantWeights: map[string]float64{"a": -2}}, "tenant_weights.a"},
		{"NaN tenant weight", quota.Policy{Limits: rpm, TenantWeights: map[string]float64{"a": math.NaN()}}, "tenant_weights.a"},
		{"empty tenant name", quota.Policy{Limits: rpm, TenantWeights: map[string]float64{"": 2}}, "tenant_weights"},
		{"slash in tenant name", quota.Policy{Limits: rpm, TenantWeights: map[string]float64{"a/b": 2}}, "tenant_weights"},
	} {
		t.Run(c.name, func(t *testing.T) { requireInvalid(t, c.policy.Validate(), c.field) })
	}
	require.NoError(t, quota.Policy{Weight: 2.5, TenantWeights: map[string]float64{"a": 0.5, "b-c.d": 3}}.Validate())
	require.NoError(t, quota.Policy{Weight: quota.MinWeight}.Validate())
	require.NoError(t, quota.Policy{Weight: quota.MaxWeight}.Validate())

	account := quota.Key{Provider: "openai", Account: "org", Model: "gpt-4o"}
	tenant := func(name string) quota.Key {
		k := account
		k.Tenant = name
		return k
	}
	for _, c := range []struct {
		name     string
		policies map[quota.Key]quota.Policy
		field    string
	}{
		{"weight on an account", map[quota.Key]quota.Policy{account: {Limits: rpm, Weight: 2}}, "weight"},
		{"tenant weights on a tenant", map[quota.Key]quota.Policy{
			account:     {Limits: rpm},
			tenant("a"): {Limits: rpm, TenantWeights: map[string]float64{"b": 2}},
		}, "tenant_weights"},
		{"a tenant weighed twice", map[quota.Key]quota.Policy{
			account:     {Limits: rpm, TenantWeights: map[string]float64{"a": 2}},
			tenant("a"): {Limits: rpm},
		}, "tenant_weights.a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := quota.NewPolicies(c.policies)
			requireInvalid(t, err, c.field)
		})
	}

	weights := map[string]float64{"gold": 3, "bronze": 0.5}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		account:        {Limits: rpm, TenantWeights: weights},
		tenant("vip"):  {Limits: rpm, Weight: 4},
		tenant("solo"): {Limits: rpm},
	})
	require.NoError(t, err)
	weights["gold"] = 100 // the policies keep their own copy
	for _, c := range []struct {
		key  quota.Key
		want float64
	}{
		{account, 1},
		{tenant("vip"), 4},
		{tenant("solo"), 1},
		{tenant("gold"), 3},
		{tenant("bronze"), 0.5},
		{tenant("unnamed"), 1},
		{quota.Key{Provider: "anthropic", Model: "claude", Tenant: "gold"}, 1},
	} {
		require.Equal(t, c.want, ps.Weight(c.key), "weight of %s", c.key)
	}

	for _, c := range []struct {
		name string
		key  quota.Key
		ok   bool
	}{
		{"untenanted", account, false},
		{"tenant with a policy", tenant("vip"), true},
		{"tenant without one", tenant("unnamed"), true},
		{"account without a policy", quota.Key{Provider: "anthropic", Model: "claude", Tenant: "vip"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, p, ok := ps.Account(c.key)
			require.Equal(t, c.ok, ok)
			if ok {
				require.Equal(t, account, k)
				require.Equal(t, rpm, p.Limits)
			}
		})
	}
}
