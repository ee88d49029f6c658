package worker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestParsePoliciesReadsEveryField(t *testing.T) {
	b, err := ParsePolicies([]byte(`policies:
  - provider: openai
    account: team-a
    model: gpt-4o
    limits:
      requests_per_minute: 500
      tokens_per_minute: 200000
      requests_per_day: 10000
      tokens_per_day: 5000000
      zone: America/Los_Angeles
      concurrency: 20
      burst: 2s
    headroom: 0.1
    priority_reserve: 0.2
    max_wait: 2m
    lease_ttl: 90s
    adopt_observed_limits: true
    calibration: {min_ratio: 0.8, max_ratio: 2, half_life: 30m}
    fallbacks: [anthropic/claude-3-5-haiku-latest]
  - provider: anthropic
    model: claude-3-5-haiku-latest
    limits: {requests_per_minute: 50, input_tokens_per_minute: 50000, output_tokens_per_minute: 10000}
`))
	require.NoError(t, err)
	key := quota.Key{Provider: "openai", Account: "team-a", Model: "gpt-4o"}
	_, p, ok := b.Policies.Lookup(key)
	require.True(t, ok)
	require.Equal(t, 0.1, p.Headroom)
	require.Equal(t, 0.2, p.PriorityReserve)
	require.Equal(t, 2*time.Minute, p.MaxWait)
	require.Equal(t, 90*time.Second, p.LeaseTTL)
	l, ok := p.Limit(quota.Tokens)
	require.True(t, ok)
	require.Equal(t, 2*time.Second, l.Burst, "burst applies to every per-minute limit")
	_, p, _ = b.Policies.Lookup(quota.Key{Provider: "anthropic", Model: "claude-3-5-haiku-latest"})
	l, _ = p.Limit(quota.Requests)
	require.Equal(t, time.Second, l.BurstTime(), "the default: a second of a per-minute limit")
	_, p, _ = b.Policies.Lookup(key)
	require.True(t, p.AdoptObservedLimits)
	require.Equal(t, quota.Calibration{MinRatio: 0.8, MaxRatio: 2, HalfLife: 30 * time.Minute}, p.Calibration)
	l, ok = p.Limit(quota.RequestsPerDay)
	require.True(t, ok)
	require.Equal(t, int64(10000), l.Capacity)
	require.Equal(t, "America/Los_Angeles", l.Zone().String())
	l, ok = p.Limit(quota.Concurrency)
	require.True(t, ok)
	require.Equal(t, int64(20), l.Capacity)
	require.Len(t, p.Limits, 5)
	require.Equal(t, map[string][]string{"openai/team-a/gpt-4o": {"anthropic/claude-3-5-haiku-latest"}}, b.Fallbacks)
}

// A duration of 0 is each field's default, as the policies format says.
func TestParsePoliciesTakesZeroDurationsAsDefaults(t *testing.T) {
	b, err := ParsePolicies([]byte(`policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 60, burst: 0}
    max_wait: 0
    lease_ttl: 0
    calibration: {half_life: 0}
`))
	require.NoError(t, err)
	_, p, ok := b.Policies.Lookup(quota.Key{Provider: "openai", Model: "gpt-4o"})
	require.True(t, ok)
	require.Equal(t, quota.DefaultLeaseTTL, p.LeaseTTL)
	require.Equal(t, quota.DefaultMaxWait, p.MaxWait)
	l, _ := p.Limit(quota.Requests)
	require.Equal(t, time.Second, l.BurstTime())
	require.Equal(t, quota.DefaultRatioHalfLife, p.Calibration.HalfLife)
}

// Each wrong field of a policies file gives its own error, by its path.
func TestParsePoliciesRejectsEachBadField(t *testing.T) {
	const ok = "  - provider: openai\n    model: gpt-4o\n    limits: {requests_per_minute: 10}\n"
	const tenantOK = "  - provider: openai\n    model: gpt-4o\n    tenant: acme\n    limits: {requests_per_minute: 5}\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"empty file", "", `policies "" is empty`},
		{"unknown field", "policies:\n  - provider: openai\n    modle: gpt-4o\n", "modle"},
		{"no provider", "policies:\n  - model: gpt-4o\n    limits: {requests_per_minute: 10}\n", `policies[0].provider "" is empty`},
		{"no model", "policies:\n  - provider: openai\n    limits: {requests_per_minute: 10}\n", `policies[0].model "" is empty`},
		{"slash in model", "policies:\n  - provider: openai\n    model: a/b\n    limits: {requests_per_minute: 10}\n", `policies[0].model "a/b"`},
		{"no limits", "policies:\n  - provider: openai\n    model: gpt-4o\n", "policies[0].limits \"\" sets no limit"},
		{"negative limit", "policies:\n  - provider: openai\n    model: gpt-4o\n    limits: {tokens_per_minute: -1}\n", "policies[0].limits.tokens_per_minute \"-1\" is negative"},
		{"bad zone", "policies:\n  - provider: openai\n    model: gpt-4o\n    limits: {requests_per_day: 5, zone: Mars/Olympus}\n", "policies[0].limits.zone \"Mars/Olympus\" is not a time zone"},
		{"headroom of one", "policies:\n  - provider: openai\n    model: gpt-4o\n    limits: {requests_per_minute: 10}\n    headroom: 1\n", "policies[0].headroom \"1\" must be in [0, 1)"},
		{"priority reserve negative", "policies:\n  - provider: openai\n    model: gpt-4o\n    limits: {requests_per_minute: 10}\n    priority_reserve: -0.1\n", "policies[0].priority_reserve"},
		{"negative burst", "policies:\n" + ok[:len(ok)-2] + ", burst: -1s}\n", `policies[0].limits.burst "-1s" is not within a minute`},
		{"burst over a minute", "policies:\n" + ok[:len(ok)-2] + ", burst: 2m}\n", `policies[0].limits.burst "2m0s" is not within a minute`},
		{"negative lease ttl", "policies:\n" + ok + "    lease_ttl: -1s\n", `policies[0].lease_ttl "-1s" is negative`},
		{"lease ttl without a unit", "policies:\n" + ok + "    lease_ttl: 600\n", `policies[0].lease_ttl "600" has no unit: write the unit, e.g. 600s`},
		{"max wait not a duration", "policies:\n" + ok + "    max_wait: soon\n", `policies[0].max_wait "soon" is not a duration`},
		{"burst without a unit", "policies:\n" + ok[:len(ok)-2] + ", burst: 1}\n", `policies[0].limits.burst "1" has no unit`},
		{"half-life a list", "policies:\n" + ok + "    calibration: {half_life: [1s]}\n", `policies[0].calibration.half_life "(a list)" is not a duration`},
		{"negative max wait", "policies:\n  - provider: openai\n    model: gpt-4o\n    limits: {requests_per_minute: 10}\n    max_wait: -1m\n", "policies[0].max_wait"},
		{"calibration ratio above one", "policies:\n" + ok + "    calibration: {min_ratio: 1.5}\n", `policies[0].calibration.min_ratio "1.5" is not in (0, 1]`},
		{"calibration half-life too short", "policies:\n" + ok + "    calibration: {half_life: 1ms}\n", `policies[0].calibration.half_life "1ms" is below 1s`},
		{"duplicate key", "policies:\n" + ok + ok, `policies[1] "openai/default/gpt-4o" is listed twice`},
		{"bad fallback target", "policies:\n" + ok + "    fallbacks: [gpt-4o-mini]\n", `policies[0].fallbacks[0] "gpt-4o-mini" is not a target`},
		{"weight of zero in tenant_weights", "policies:\n" + ok + "    tenant_weights: {acme: 0}\n", `policies[0].tenant_weights.acme "0" is not in [0.000001, 1000000]`},
		{"negative weight", "policies:\n" + ok + tenantOK + "    weight: -1\n", `policies[1].weight "-1" is not in [0.000001, 1000000]`},
		{"weight too large", "policies:\n" + ok + tenantOK + "    weight: 2e6\n", `policies[1].weight "2e+06" is not in [0.000001, 1000000]`},
		{"weight on an account", "policies:\n" + ok + "    weight: 2\n", `policies[0].weight "2" is set on an account's entry (no tenant)`},
		{"tenant_weights on a tenant", "policies:\n" + ok + tenantOK + "    tenant_weights: {beta: 2}\n", `policies[1].tenant_weights "acme" is set on a tenant's entry`},
		{"tenant weighed twice", "policies:\n" + ok + "    tenant_weights: {acme: 2}\n" + tenantOK, `policies[0].tenant_weights.acme "2" weighs a tenant with an entry of its own (policies[1])`},
		{"tenant_weights naming no tenant", "policies:\n" + ok + "    tenant_weights: {\"\": 2}\n", `policies[0].tenant_weights "" names no tenant`},
		{"tenant_weights naming a bad tenant", "policies:\n" + ok + "    tenant_weights: {\"a/b\": 2}\n", `policies[0].tenant_weights "a/b" contains '/'`},
		{"tenant weight not a number", "policies:\n" + ok + "    tenant_weights: {acme: lots}\n", "line 5: cannot unmarshal !!str `lots` into float64"},
		{"fallback without a policy", "policies:\n" + ok + "    fallbacks: [openai/gpt-4o-mini]\n", `policies[0].fallbacks[0] "openai/gpt-4o-mini" has no policy of its own`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicies([]byte(tc.yaml))
			require.Error(t, err)
			require.ErrorContains(t, err, tc.want)
			var pe *PolicyError
			if errors.As(err, &pe) {
				require.NotEmpty(t, pe.Fix, "every error says how to fix it")
			}
		})
	}
}

// The tenants a policies file names are the ones metrics count by name.
func TestBudgetsNameTheirTenants(t *testing.T) {
	b, err := ParsePolicies([]byte(`policies:
  - {provider: openai, model: gpt-4o, limits: {requests_per_minute: 10}}
  - {provider: openai, model: gpt-4o, tenant: beta, limits: {requests_per_minute: 5}}
  - {provider: openai, model: gpt-4o-mini, tenant: acme, limits: {requests_per_minute: 5}}
  - {provider: openai, model: gpt-4o, tenant: acme, limits: {requests_per_minute: 5}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Tenants(), []string{"acme", "beta"}; !slices.Equal(got, want) {
		t.Fatalf("Tenants() = %q, want %q", got, want)
	}
}

// A tenant's weight comes from its own entry or its account's
// tenant_weights; tenants named in either are named in the metrics.
func TestParsePoliciesReadsTenantWeights(t *testing.T) {
	b, err := ParsePolicies([]byte(`policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 10}
    tenant_weights: {acme: 2, beta: 0.5}
  - provider: openai
    model: gpt-4o
    tenant: gamma
    weight: 3
    limits: {requests_per_minute: 5}
  - provider: openai
    model: gpt-4o
    tenant: delta
    limits: {requests_per_minute: 5}
`))
	require.NoError(t, err)
	key := func(tenant string) quota.Key { return quota.Key{Provider: "openai", Model: "gpt-4o", Tenant: tenant} }
	for tenant, want := range map[string]float64{"acme": 2, "beta": 0.5, "gamma": 3, "delta": 1, "unnamed": 1, "": 1} {
		require.Equal(t, want, b.Policies.Weight(key(tenant)), "weight of %q", tenant)
	}
	_, p, ok := b.Policies.Lookup(key(""))
	require.True(t, ok)
	require.Equal(t, map[string]float64{"acme": 2, "beta": 0.5}, p.TenantWeights)
	_, p, ok = b.Policies.Lookup(key("gamma"))
	require.True(t, ok)
	require.Equal(t, 3.0, p.Weight)
	require.Equal(t, []string{"acme", "beta", "delta", "gamma"}, b.Tenants())
}
