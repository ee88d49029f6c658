package worker

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a policy's zone (Gemini's America/Los_Angeles) loads on any host, distroless or scratch images included

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/quota/price"
)

// Budgets is what a policies file configures: each key's quota.Policy and the
// fallback chains the interceptor escalates along. It is a value; the zero
// Budgets governs nothing.
type Budgets struct {
	// Policies are the keys' budgets.
	Policies quota.Policies
	// Fallbacks maps "provider/model" or "provider/account/model" to the
	// backups tried in order (interceptor.Options.Fallbacks).
	Fallbacks map[string][]string
	// Pools are the keys served by several members
	// (interceptor.Options.Pools); each member's budget is in Policies.
	Pools pool.Set
	// Accounts are the pool members' accounts, each reached with a key
	// and endpoint of its own.
	Accounts []Account
	// Prices is the price table money budgets charge by
	// (interceptor.Options.Prices): price.Shipped with the file's
	// prices merged over it. The zero Prices means price.Shipped
	// (Start fills it in).
	Prices price.Table
	// FallbackWhenSpent are the keys of the entries with spend_fallback
	// (interceptor.Options.FallbackWhenSpent): once one of these budgets'
	// money is spent, its calls move to their fallbacks instead of failing
	// with tollgate.BudgetExhausted.
	FallbackWhenSpent []quota.Key
}

// Tenants returns the tenants the budgets name, sorted and each once: those
// with a policy of their own and those an account's tenant_weights weighs.
// They are the tenants the metrics count under their own name
// (interceptor.Options.Tenants); every other tenant shares one label value.
func (b Budgets) Tenants() []string {
	var out []string
	for _, k := range b.Policies.Keys() {
		if k.Tenant != "" {
			out = append(out, k.Tenant)
			continue
		}
		if _, p, ok := b.Policies.Lookup(k); ok {
			for name := range p.TenantWeights {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// policiesFile is the YAML layout of a policies file:
//
//	policies:
//	  - provider: openai          # required
//	    account: ""               # optional; empty is the default account
//	    model: gpt-4o-mini        # required
//	    tenant: ""                # optional: a tenant's own budget inside the account's
//	    weight: 0                 # on a tenant's entry: its share of a saturated account; 0 means 1
//	    tenant_weights: {}        # on an account's entry: weights of tenants without an entry
//	    limits:                   # each optional; at least one
//	      requests_per_minute: 500
//	      tokens_per_minute: 200000
//	      input_tokens_per_minute: 0
//	      output_tokens_per_minute: 0
//	      requests_per_day: 10000
//	      tokens_per_day: 0
//	      spend_per_day: 0            # money, in the price table's currency (12.50 or "12.50")
//	      spend_per_month: 0          # money per calendar month
//	      zone: America/Los_Angeles   # midnight of this zone resets the daily limits and starts each month; default UTC
//	      concurrency: 20
//	      burst: 1s                 # how much of each per-minute limit may start at once; default 1s, 1m for all of it
//	    spend_fallback: false     # true: calls of a spent money budget move to fallbacks instead of failing
//	    headroom: 0.1             # fraction kept unused
//	    priority_reserve: 0.2     # fraction low-priority calls may not use
//	    max_wait: 5m              # longest place in line; default 5m
//	    lease_ttl: 10m            # longest a grant lives unrenewed (a crashed worker's slot); default 10m
//	    adopt_observed_limits: false
//	    calibration:              # learning what the provider counts per estimated prompt token
//	      off: false              # true charges characters/4 as is
//	      min_ratio: 0.5          # bounds of the ratio learned; defaults 0.5 and 4
//	      max_ratio: 4
//	      half_life: 1h           # an unrefreshed ratio comes halfway back to 1 in this long
//	    fallbacks: [anthropic/claude-3-5-haiku-latest]
//	prices:                       # merged over price.Shipped, per million tokens (see priceEntry)
//	  openai/gpt-4o: {input: 2.50, cached_input: 1.25, output: 10}
type policiesFile struct {
	Policies []policyEntry         `yaml:"policies"`
	Pools    []poolEntry           `yaml:"pools"`
	Prices   map[string]priceEntry `yaml:"prices"`
}

type policyEntry struct {
	Provider            string             `yaml:"provider"`
	Account             string             `yaml:"account"`
	Model               string             `yaml:"model"`
	Tenant              string             `yaml:"tenant"`
	Weight              float64            `yaml:"weight"`
	TenantWeights       map[string]float64 `yaml:"tenant_weights"`
	Limits              limitsEntry        `yaml:"limits"`
	Headroom            float64            `yaml:"headroom"`
	PriorityReserve     float64            `yaml:"priority_reserve"`
	MaxWait             duration           `yaml:"max_wait"`
	LeaseTTL            duration           `yaml:"lease_ttl"`
	AdoptObservedLimits bool               `yaml:"adopt_observed_limits"`
	Calibration         calibrationEntry   `yaml:"calibration"`
	Fallbacks           []string           `yaml:"fallbacks"`
	Models              []string           `yaml:"models"`
	SpendFallback       bool               `yaml:"spend_fallback"`
}

type calibrationEntry struct {
	Off      bool     `yaml:"off"`
	MinRatio float64  `yaml:"min_ratio"`
	MaxRatio float64  `yaml:"max_ratio"`
	HalfLife duration `yaml:"half_life"`
}

type limitsEntry struct {
	RequestsPerMinute     int64    `yaml:"requests_per_minute"`
	TokensPerMinute       int64    `yaml:"tokens_per_minute"`
	InputTokensPerMinute  int64    `yaml:"input_tokens_per_minute"`
	OutputTokensPerMinute int64    `yaml:"output_tokens_per_minute"`
	RequestsPerDay        int64    `yaml:"requests_per_day"`
	TokensPerDay          int64    `yaml:"tokens_per_day"`
	SpendPerDay           money    `yaml:"spend_per_day"`
	SpendPerMonth         money    `yaml:"spend_per_month"`
	Zone                  string   `yaml:"zone"`
	Concurrency           int64    `yaml:"concurrency"`
	Burst                 duration `yaml:"burst"`
}

// PolicyError reports a bad field of a policies file, by its path in the
// file (e.g. "policies[1].limits.requests_per_minute").
type PolicyError struct {
	Field   string
	Value   string
	Problem string
	Fix     string
	Err     error
}

// Error returns e.g. `policies[0].model "" is empty: set the model id`.
func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s %q %s: %s", e.Field, e.Value, e.Problem, e.Fix)
}

// Unwrap returns the underlying error.
func (e *PolicyError) Unwrap() error { return e.Err }

// LoadPolicies reads and parses the policies file at path (see
// ParsePolicies).
func LoadPolicies(path string) (Budgets, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Budgets{}, fmt.Errorf("cannot read the file (%v): check the path", err)
	}
	return ParsePolicies(data)
}

// ParsePolicies decodes a policies file (the YAML layout documented on
// policiesFile and in the README) and validates every entry. Unknown fields
// are errors. It returns a *PolicyError naming the first bad field, or the
// YAML decoder's error with its line.
func ParsePolicies(data []byte) (Budgets, error) {
	var f policiesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Budgets{}, fmt.Errorf("not a valid policies file: %w (see the README's policies format)", err)
	}
	if len(f.Policies) == 0 && len(f.Pools) == 0 {
		return Budgets{}, &PolicyError{Field: "policies", Problem: "is empty", Fix: "list at least one provider/model with its limits"}
	}
	m := make(map[quota.Key]quota.Policy, len(f.Policies))
	fallbacks := make(map[string][]string)
	for i, e := range f.Policies {
		field := fmt.Sprintf("policies[%d]", i)
		key := quota.Key{Provider: e.Provider, Account: e.Account, Model: e.Model, Tenant: e.Tenant}
		if err := key.Validate(); err != nil {
			var inv *quota.InvalidError
			if errors.As(err, &inv) {
				return Budgets{}, &PolicyError{Field: field + "." + trimKeyPrefix(inv.Field), Value: inv.Value, Problem: inv.Problem, Fix: inv.Fix, Err: err}
			}
			return Budgets{}, fmt.Errorf("%s: %w", field, err)
		}
		if _, dup := m[key]; dup {
			return Budgets{}, &PolicyError{Field: field, Value: key.String(), Problem: "is listed twice", Fix: "keep one entry per provider/account/model"}
		}
		p, err := e.policy(field)
		if err != nil {
			return Budgets{}, err
		}
		m[key] = p
		if len(e.Fallbacks) > 0 {
			if e.Tenant != "" {
				return Budgets{}, &PolicyError{Field: field + ".fallbacks", Value: key.String(), Problem: "is set on a tenant's entry",
					Fix: "set fallbacks on the account-wide entry (no tenant)"}
			}
			for j, to := range e.Fallbacks {
				if _, err := tollgate.ParseTarget(to); err != nil {
					return Budgets{}, &PolicyError{Field: fmt.Sprintf("%s.fallbacks[%d]", field, j), Value: to, Problem: "is not a target",
						Fix: `use "provider/model" or "provider/account/model", e.g. "anthropic/claude-3-5-haiku-latest"`, Err: err}
				}
			}
			t := tollgate.Target{Provider: key.Provider, Account: key.Account, Model: key.Model}
			fallbacks[t.String()] = append([]string(nil), e.Fallbacks...)
		}
	}
	if err := weighedOnce(f.Policies); err != nil {
		return Budgets{}, err
	}
	poolMembers, poolIndex, accounts, err := parsePools(f.Pools, m, fallbacks)
	if err != nil {
		return Budgets{}, err
	}
	ps, err := quota.NewPolicies(m)
	if err != nil {
		return Budgets{}, modelsErr(err, f.Policies)
	}
	pools, err := pool.New(ps, poolMembers)
	if err != nil {
		return Budgets{}, poolsErr(err, poolIndex)
	}
	// A backup with no policy would run ungoverned: the one place a
	// stampede of escalated calls most needs a budget.
	for _, list := range []struct {
		name      string
		fallbacks func(i int) []string
		n         int
	}{
		{"policies", func(i int) []string { return f.Policies[i].Fallbacks }, len(f.Policies)},
		{"pools", func(i int) []string { return f.Pools[i].Fallbacks }, len(f.Pools)},
	} {
		for i := range list.n {
			for j, to := range list.fallbacks(i) {
				t, _ := tollgate.ParseTarget(to)
				k := quota.Key{Provider: t.Provider, Account: t.Account, Model: t.Model}
				if _, isPool := pools.Members(k); isPool {
					continue
				}
				if _, _, ok := ps.Lookup(k); !ok {
					return Budgets{}, &PolicyError{Field: fmt.Sprintf("%s[%d].fallbacks[%d]", list.name, i, j), Value: to, Problem: "has no policy of its own",
						Fix: "add an entry for it so calls that fall back to it are governed too"}
				}
			}
		}
	}
	prices, err := parsePrices(f.Prices)
	if err != nil {
		return Budgets{}, err
	}
	for i, e := range f.Policies {
		key := quota.Key{Provider: e.Provider, Account: e.Account, Model: e.Model, Tenant: e.Tenant}
		if err := checkPriced(fmt.Sprintf("policies[%d]", i), key, e, ps.Shared(key.WithoutTenant()), prices); err != nil {
			return Budgets{}, err
		}
	}
	for i, pe := range f.Pools {
		for j, me := range pe.Members {
			key := quota.Key{Provider: pe.Provider, Account: me.Account, Model: cmp.Or(me.Model, pe.Model)}
			if err := checkPriced(fmt.Sprintf("pools[%d].members[%d]", i, j), key, me.policyEntry, ps.Shared(key), prices); err != nil {
				return Budgets{}, err
			}
		}
	}
	spendFallback, err := spendFallbacks(f.Policies, fallbacks)
	if err != nil {
		return Budgets{}, err
	}
	return Budgets{Policies: ps, Fallbacks: fallbacks, Pools: pools, Accounts: accounts, Prices: prices, FallbackWhenSpent: spendFallback}, nil
}

// weighedOnce reports a *PolicyError for a tenant_weights entry naming a
// tenant that has an entry of its own under the same account: a tenant is
// weighed in one place, its own entry's weight.
func weighedOnce(entries []policyEntry) error {
	own := make(map[quota.Key]int, len(entries))
	for i, e := range entries {
		if e.Tenant != "" {
			own[quota.Key{Provider: e.Provider, Account: e.Account, Model: e.Model, Tenant: e.Tenant}] = i
		}
	}
	for i, e := range entries {
		names := make([]string, 0, len(e.TenantWeights))
		for name := range e.TenantWeights {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			k := quota.Key{Provider: e.Provider, Account: e.Account, Model: e.Model, Tenant: name}
			if j, ok := own[k]; ok {
				return &PolicyError{Field: fmt.Sprintf("policies[%d].tenant_weights.%s", i, name), Value: strconv.FormatFloat(e.TenantWeights[name], 'g', -1, 64),
					Problem: fmt.Sprintf("weighs a tenant with an entry of its own (policies[%d])", j),
					Fix:     fmt.Sprintf("set weight on policies[%d] instead and remove %s from tenant_weights", j, name)}
			}
		}
	}
	return nil
}

func trimKeyPrefix(field string) string {
	if len(field) > 4 && field[:4] == "key." {
		return field[4:]
	}
	return field
}

func (e policyEntry) policy(field string) (quota.Policy, error) {
	var p quota.Policy
	l := e.Limits
	zone := time.UTC
	if l.Zone != "" {
		z, err := time.LoadLocation(l.Zone)
		if err != nil {
			return p, &PolicyError{Field: field + ".limits.zone", Value: l.Zone, Problem: "is not a time zone",
				Fix: `use an IANA name such as "UTC" or "America/Los_Angeles"`, Err: err}
		}
		zone = z
	}
	for _, a := range []struct {
		name string
		v    int64
		lim  func(int64) quota.Limit
	}{
		{"requests_per_minute", l.RequestsPerMinute, func(n int64) quota.Limit { return quota.PerMinute(quota.Requests, n) }},
		{"tokens_per_minute", l.TokensPerMinute, func(n int64) quota.Limit { return quota.PerMinute(quota.Tokens, n) }},
		{"input_tokens_per_minute", l.InputTokensPerMinute, func(n int64) quota.Limit { return quota.PerMinute(quota.InputTokens, n) }},
		{"output_tokens_per_minute", l.OutputTokensPerMinute, func(n int64) quota.Limit { return quota.PerMinute(quota.OutputTokens, n) }},
		{"requests_per_day", l.RequestsPerDay, func(n int64) quota.Limit { return quota.PerDay(quota.Requests, n, zone) }},
		{"tokens_per_day", l.TokensPerDay, func(n int64) quota.Limit { return quota.PerDay(quota.Tokens, n, zone) }},
		{"concurrency", l.Concurrency, quota.Concurrent},
	} {
		if a.v < 0 {
			return p, &PolicyError{Field: field + ".limits." + a.name, Value: strconv.FormatInt(a.v, 10), Problem: "is negative",
				Fix: "use the provider's published limit, or leave it out for no limit on that axis"}
		}
		if a.v > 0 {
			p.Limits = append(p.Limits, a.lim(a.v))
		}
	}
	for _, a := range []struct {
		name string
		v    money
		lim  func(quota.Money, *time.Location) quota.Limit
	}{
		{"spend_per_day", l.SpendPerDay, quota.DailySpend},
		{"spend_per_month", l.SpendPerMonth, quota.MonthlySpend},
	} {
		m, err := a.v.get(field + ".limits." + a.name)
		if err != nil {
			return p, err
		}
		if m > 0 {
			p.Limits = append(p.Limits, a.lim(m, zone))
		}
	}
	burst, err := l.Burst.get(field + ".limits.burst")
	if err != nil {
		return p, err
	}
	if burst < 0 || burst > time.Minute {
		return p, &PolicyError{Field: field + ".limits.burst", Value: burst.String(), Problem: "is not within a minute",
			Fix: "use e.g. 1s (one second's worth of each per-minute limit at once, the default), or 1m to let a whole minute's worth go at once"}
	}
	for i := range p.Limits {
		if p.Limits[i].Axis.Kind() == quota.Bucket {
			p.Limits[i] = p.Limits[i].WithBurst(burst)
		}
	}
	if len(p.Limits) == 0 {
		return p, &PolicyError{Field: field + ".limits", Problem: "sets no limit",
			Fix: "set at least one, e.g. requests_per_minute: 500 (the provider's published limit)"}
	}
	p.Headroom, p.PriorityReserve, p.AdoptObservedLimits = e.Headroom, e.PriorityReserve, e.AdoptObservedLimits
	if p.MaxWait, err = e.MaxWait.get(field + ".max_wait"); err != nil {
		return p, err
	}
	if p.LeaseTTL, err = e.LeaseTTL.get(field + ".lease_ttl"); err != nil {
		return p, err
	}
	switch {
	case e.Tenant == "" && e.Weight != 0:
		return p, &PolicyError{Field: field + ".weight", Value: strconv.FormatFloat(e.Weight, 'g', -1, 64), Problem: "is set on an account's entry (no tenant)",
			Fix: "weigh tenants on their own entries (weight) or here with tenant_weights, e.g. tenant_weights: {acme: 2}"}
	case e.Tenant != "" && len(e.TenantWeights) > 0:
		return p, &PolicyError{Field: field + ".tenant_weights", Value: e.Tenant, Problem: "is set on a tenant's entry",
			Fix: "set weight on this entry for its own share, or tenant_weights on the account's entry (no tenant)"}
	}
	p.Weight, p.TenantWeights, p.Models = e.Weight, e.TenantWeights, e.Models
	c := e.Calibration
	halfLife, err := c.HalfLife.get(field + ".calibration.half_life")
	if err != nil {
		return p, err
	}
	p.Calibration = quota.Calibration{Off: c.Off, MinRatio: c.MinRatio, MaxRatio: c.MaxRatio, HalfLife: halfLife}
	if err := p.Validate(); err != nil {
		var inv *quota.InvalidError
		if errors.As(err, &inv) {
			return p, &PolicyError{Field: field + "." + inv.Field, Value: inv.Value, Problem: inv.Problem, Fix: inv.Fix, Err: err}
		}
		return p, fmt.Errorf("%s: %w", field, err)
	}
	return p, nil
}

// modelsErr turns quota.NewPolicies's error about an entry's models (the
// one check it makes across entries) into a *PolicyError on that entry.
func modelsErr(err error, entries []policyEntry) error {
	var inv *quota.InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	for i, e := range entries {
		k := quota.Key{Provider: e.Provider, Account: e.Account, Model: e.Model, Tenant: e.Tenant}
		if strings.HasPrefix(err.Error(), "policy "+k.String()+":") {
			return &PolicyError{Field: fmt.Sprintf("policies[%d].%s", i, inv.Field), Value: inv.Value, Problem: inv.Problem, Fix: inv.Fix, Err: err}
		}
	}
	return err
}
