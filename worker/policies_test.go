package worker

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
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

// moneyFile budgets an account by the day in Los Angeles and a tenant in
// it by the month in Berlin, falling back when the tenant's is spent, and
// overrides one shipped price and adds another.
const moneyFile = `policies:
  - provider: openai
    account: team-a
    model: gpt-4o
    limits: {requests_per_minute: 500, spend_per_day: 12.50, zone: America/Los_Angeles}
    fallbacks: [openai/gpt-4o-mini]
  - provider: openai
    account: team-a
    model: gpt-4o
    tenant: acme
    limits: {spend_per_month: "50", zone: Europe/Berlin}
    spend_fallback: true
  - provider: openai
    model: gpt-4o-mini
    limits: {requests_per_minute: 10, spend_per_day: 0}
  - provider: openai
    model: ft-support
    models: [ft-support-v2]
    limits: {spend_per_month: "$0.000125"}
prices:
  openai/gpt-4o: {input: 2, cached_input: "1.0", output: 8}
  openai/ft-support*: {input: 3.000001, output: 12}
`

// Money budgets are read to the millionth, in their zone, with the file's
// prices over the shipped table and the entries that fall back when spent.
func TestParsePoliciesReadsMoneyBudgets(t *testing.T) {
	b, err := ParsePolicies([]byte(moneyFile))
	require.NoError(t, err)
	account := quota.Key{Provider: "openai", Account: "team-a", Model: "gpt-4o"}
	_, p, ok := b.Policies.Lookup(account)
	require.True(t, ok)
	l, ok := p.Limit(quota.SpendPerDay)
	require.True(t, ok)
	require.Equal(t, int64(12_500_000), l.Capacity)
	require.Equal(t, "America/Los_Angeles", l.Zone().String())
	_, noMonth := p.Limit(quota.SpendPerMonth)
	require.False(t, noMonth)

	tenant := account
	tenant.Tenant = "acme"
	_, p, ok = b.Policies.Lookup(tenant)
	require.True(t, ok)
	l, ok = p.Limit(quota.SpendPerMonth)
	require.True(t, ok)
	require.Equal(t, int64(50_000_000), l.Capacity)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	start, end := l.Window(time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC)) // already January in Berlin
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, berlin).Unix(), start.Unix())
	require.Equal(t, time.Date(2027, 2, 1, 0, 0, 0, 0, berlin).Unix(), end.Unix())

	_, p, _ = b.Policies.Lookup(quota.Key{Provider: "openai", Model: "gpt-4o-mini"})
	require.Len(t, p.Limits, 1, "a spend of 0 sets no budget, as on every axis")
	_, p, _ = b.Policies.Lookup(quota.Key{Provider: "openai", Model: "ft-support"})
	l, _ = p.Limit(quota.SpendPerMonth)
	require.Equal(t, int64(125), l.Capacity, "a millionth is exact")

	require.Equal(t, []quota.Key{tenant}, b.FallbackWhenSpent)

	got4o, ok := b.Prices.Lookup("openai", "gpt-4o")
	require.True(t, ok)
	require.Equal(t, price.Price{Input: 2_000_000, CachedInput: 1_000_000, Output: 8_000_000}, got4o, "the file's entry replaces the shipped one whole")
	ft, ok := b.Prices.Lookup("openai", "ft-support-v2")
	require.True(t, ok)
	require.Equal(t, price.Price{Input: 3_000_001, Output: 12_000_000}, ft)
	shipped := price.Shipped()
	want, _ := shipped.Lookup("anthropic", "claude-sonnet-4-20250514")
	got, ok := b.Prices.Lookup("anthropic", "claude-sonnet-4-20250514")
	require.True(t, ok)
	require.Equal(t, want, got, "the shipped prices stay under the file's")
	require.Equal(t, shipped.Len()+1, b.Prices.Len())
}

// A file without prices charges by the shipped table.
func TestParsePoliciesPricesByTheShippedTableByDefault(t *testing.T) {
	b, err := ParsePolicies([]byte("policies:\n  - {provider: openai, model: gpt-4o, limits: {spend_per_day: 5}}\n"))
	require.NoError(t, err)
	require.Equal(t, price.Shipped().Len(), b.Prices.Len())
	got, ok := b.Prices.Lookup("openai", "gpt-4o")
	require.True(t, ok)
	want, _ := price.Shipped().Lookup("openai", "gpt-4o")
	require.Equal(t, want, got)
	require.Empty(t, b.FallbackWhenSpent)
}

// Each wrong money field gives its own error, by its path, with the fix.
func TestParsePoliciesRejectsEachBadMoneyField(t *testing.T) {
	entry := func(limits string, more ...string) string {
		s := "  - provider: openai\n    model: gpt-4o\n    limits: {" + limits + "}\n"
		for _, m := range more {
			s += "    " + m + "\n"
		}
		return s
	}
	const mini = "  - provider: openai\n    model: gpt-4o-mini\n    limits: {requests_per_minute: 10}\n"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"amount not a number", "policies:\n" + entry("spend_per_month: lots"), `policies[0].limits.spend_per_month "lots" is not an amount: write a decimal number`},
		{"amount of seven decimals", "policies:\n" + entry("spend_per_day: 0.0000001"), `policies[0].limits.spend_per_day "0.0000001" is not an amount`},
		{"amount in exponent form", "policies:\n" + entry("spend_per_day: 1e3"), `policies[0].limits.spend_per_day "1e3" is not an amount`},
		{"negative amount", "policies:\n" + entry("spend_per_day: -5"), `policies[0].limits.spend_per_day "-5" is negative`},
		{"amount a list", "policies:\n" + entry("spend_per_month: [5]"), `policies[0].limits.spend_per_month "(a list)" is not an amount`},
		{"amount too large", "policies:\n" + entry("spend_per_month: 99999999999"), `policies[0].limits.spend_per_month "99999999999" is too large`},
		{"unknown money field", "policies:\n" + entry("spend_per_week: 5"), "field spend_per_week not found"},
		{"price not a number", "policies:\n" + mini + "prices:\n  openai/gpt-4o: {input: abc, output: 10}\n", `prices.openai/gpt-4o.input "abc" is not an amount`},
		{"price negative", "policies:\n" + mini + "prices:\n  openai/gpt-4o: {input: 1, cached_input: -0.5, output: 10}\n", `prices.openai/gpt-4o.cached_input "-0.5" is negative`},
		{"price without output", "policies:\n" + mini + "prices:\n  openai/gpt-4o: {input: 2.5}\n", `prices.openai/gpt-4o.output "" is missing: give the provider's price per million answer tokens`},
		{"price without input", "policies:\n" + mini + "prices:\n  openai/gpt-4o: {output: 10}\n", `prices.openai/gpt-4o.input "" is missing`},
		{"price of nothing", "policies:\n" + mini + "prices:\n  openai/gpt-4o: {input: 0, output: 0}\n", `prices.openai/gpt-4o "0" prices nothing`},
		{"price naming no provider", "policies:\n" + mini + "prices:\n  gpt-4o: {input: 1, output: 2}\n", `prices.gpt-4o "gpt-4o" does not name a provider and model`},
		{"price with an unknown field", "policies:\n" + mini + "prices:\n  openai/gpt-4o: {input: 1, output: 2, outptu: 3}\n", "field outptu not found"},
		{"money limit on an unpriced model", "policies:\n  - {provider: openai, model: gpt-9, limits: {spend_per_month: 50}}\n",
			`policies[0].limits.spend_per_month "50" limits spend on openai/gpt-9, which the price table does not price: add prices.openai/gpt-9`},
		{"money limit on an unpriced shared name", "policies:\n" + entry("spend_per_day: 5", "models: [gpt-4o-*, gpt-4o-custom]"),
			`policies[0].limits.spend_per_day "5" limits spend on openai/gpt-4o-custom, which the price table does not price: add prices.openai/gpt-4o-custom`},
		{"tenant's money limit on an unpriced shared name", "policies:\n" + entry("requests_per_minute: 10", "models: [gpt-4o-custom]") +
			"  - {provider: openai, model: gpt-4o, tenant: acme, limits: {spend_per_day: 1}}\n",
			`policies[1].limits.spend_per_day "1" limits spend on openai/gpt-4o-custom`},
		{"pool member's money limit on an unpriced deployment", "pools:\n  - provider: openai\n    model: gpt-4o\n    members:\n" +
			"      - {account: east, model: east-deploy, api_key_env: OPENAI_EAST_API_KEY, limits: {spend_per_day: 20}}\n",
			`pools[0].members[0].limits.spend_per_day "20" limits spend on openai/east-deploy, which the price table does not price: add prices.openai/east-deploy`},
		{"spend_fallback without a money limit", "policies:\n" + entry("requests_per_minute: 10", "spend_fallback: true", "fallbacks: [openai/gpt-4o-mini]") + mini,
			`policies[0].spend_fallback "true" is set on an entry with no money limit`},
		{"spend_fallback with a budget of 0", "policies:\n" + entry("requests_per_minute: 10, spend_per_day: 0", "spend_fallback: true", "fallbacks: [openai/gpt-4o-mini]") + mini,
			`policies[0].spend_fallback "true" is set on an entry with no money limit`},
		{"spend_fallback with nowhere to go", "policies:\n" + entry("spend_per_day: 5", "spend_fallback: true"),
			`policies[0].spend_fallback "true" has no fallbacks to move the spent budget's calls to: set fallbacks on the account-wide entry of openai/gpt-4o`},
		{"spend_fallback on a pool member", "pools:\n  - provider: openai\n    model: gpt-4o\n    members:\n" +
			"      - {account: east, api_key_env: OPENAI_EAST_API_KEY, limits: {spend_per_day: 20}, spend_fallback: true}\n",
			`pools[0].members[0].spend_fallback "true" is set on a pool member`},
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

// The README's money budgets example is a valid policies file, and means
// what the README says of it.
func TestREADMEMoneyBudgetsExampleParses(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n### Money budgets\n")
	require.True(t, ok, "the README has a Money budgets section")
	_, block, ok := strings.Cut(section, "```yaml\n")
	require.True(t, ok, "the section has a policies file")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	b, err := ParsePolicies([]byte(block))
	require.NoError(t, err)
	acme := quota.Key{Provider: "openai", Account: "prod", Model: "gpt-4o", Tenant: "acme"}
	require.Equal(t, []quota.Key{acme}, b.FallbackWhenSpent)
	_, p, _ := b.Policies.Lookup(acme)
	l, ok := p.Limit(quota.SpendPerMonth)
	require.True(t, ok)
	require.Equal(t, int64(quota.Dollars(1500)), l.Capacity)
	_, ok = b.Prices.Lookup("openai", "ft:gpt-4o-mini-2024-07-18:acme::abc123")
	require.True(t, ok, "the fine-tune pattern prices its models")
}
