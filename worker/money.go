package worker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/price"
)

// money is an amount in a policies file: a decimal number in the price
// table's currency, written as a YAML number (12.5) or string ("12.50",
// "$12.50"), read by quota.ParseMoney from the text as written so that no
// float rounds it. Like duration, decoding never fails on the value
// itself: what does not parse is kept, and reported by get with the
// field's path.
type money struct {
	m   quota.Money
	raw string // the value as written; "" when left out
	bad bool   // raw is not an amount, or not a scalar
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *money) UnmarshalYAML(n *yaml.Node) error {
	*m = money{}
	switch {
	case n.Kind != yaml.ScalarNode:
		m.raw, m.bad = "(a "+kindName(n.Kind)+")", true
	case n.Tag == "!!null":
	default:
		m.raw = n.Value
		v, err := quota.ParseMoney(n.Value)
		m.m, m.bad = v, err != nil
	}
	return nil
}

// get returns the amount (0 when the field is left out), or a
// *PolicyError naming field when the file's value is not an amount.
func (m money) get(field string) (quota.Money, error) {
	if !m.bad {
		return m.m, nil
	}
	if strings.HasPrefix(strings.TrimSpace(m.raw), "-") {
		return 0, &PolicyError{Field: field, Value: m.raw, Problem: "is negative",
			Fix: "give the amount in the price table's currency, e.g. 12.50, or leave the field out"}
	}
	const notAmount, example = "is not an amount", `write a decimal number of at most six decimals, e.g. 12.50 or "0.000125"`
	if strings.HasPrefix(m.raw, "(a ") { // a list or mapping
		return 0, &PolicyError{Field: field, Value: m.raw, Problem: notAmount, Fix: example}
	}
	_, err := quota.ParseMoney(m.raw)
	// ParseMoney says `"raw" problem: fix`; keep its words, name the field.
	problem, fix, ok := strings.Cut(strings.TrimPrefix(err.Error(), fmt.Sprintf("%q ", m.raw)), ": ")
	if !ok {
		problem, fix = notAmount, example
	}
	return 0, &PolicyError{Field: field, Value: m.raw, Problem: problem, Fix: fix, Err: err}
}

// given reports whether the field was given a value (even a bad one).
func (m money) given() bool { return m.raw != "" }

// priceEntry is one model's price in a policies file's prices, per
// million tokens:
//
//	prices:
//	  openai/gpt-4o: {input: 2.50, cached_input: 1.25, output: 10}
//	  anthropic/claude-sonnet-4*: {input: 3, cached_input: 0.30, cache_write: 3.75, output: 15}
type priceEntry struct {
	Input       money `yaml:"input"`
	CachedInput money `yaml:"cached_input"`
	CacheWrite  money `yaml:"cache_write"`
	Output      money `yaml:"output"`
}

// parsePrices returns price.Shipped with the file's prices merged
// over it (an entry replaces the shipped entry of the same name whole), or
// a *PolicyError naming the first bad entry by its path.
func parsePrices(entries map[string]priceEntry) (price.Table, error) {
	shipped := price.Shipped()
	if len(entries) == 0 {
		return shipped, nil
	}
	m := make(map[string]price.Price, len(entries))
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e := entries[name]
		field := "prices." + name
		var p price.Price
		for _, f := range [...]struct {
			name string
			v    money
			to   *quota.Money
		}{{"input", e.Input, &p.Input}, {"cached_input", e.CachedInput, &p.CachedInput}, {"cache_write", e.CacheWrite, &p.CacheWrite}, {"output", e.Output, &p.Output}} {
			v, err := f.v.get(field + "." + f.name)
			if err != nil {
				return price.Table{}, err
			}
			*f.to = v
		}
		// An entry replaces the shipped one whole: one left without an
		// input or output price would make those tokens free.
		for _, f := range [...]struct {
			name, what string
			v          money
		}{{"input", "prompt", e.Input}, {"output", "answer", e.Output}} {
			if !f.v.given() {
				return price.Table{}, &PolicyError{Field: field + "." + f.name, Problem: "is missing",
					Fix: "give the provider's price per million " + f.what + " tokens (an entry replaces the shipped price whole), e.g. " + f.name + ": 2.50"}
			}
		}
		m[name] = p
	}
	if _, err := price.NewTable(m); err != nil {
		return price.Table{}, priceErr(err)
	}
	ps, err := shipped.With(m)
	if err != nil {
		return price.Table{}, priceErr(err)
	}
	return ps, nil
}

// priceErr turns price.NewTable's *quota.InvalidError, whose field is
// already the entry's path ("prices.openai/gpt-4o"), into a *PolicyError.
func priceErr(err error) error {
	var inv *quota.InvalidError
	if errors.As(err, &inv) {
		return &PolicyError{Field: inv.Field, Value: inv.Value, Problem: inv.Problem, Fix: inv.Fix, Err: err}
	}
	return err
}

// moneyLimit returns the first money limit of an entry's limits (a
// positive amount; 0 sets none, as on every axis), by the field that sets
// it, and whether there is one.
func (l limitsEntry) moneyLimit() (field string, amount money, ok bool) {
	switch {
	case l.SpendPerDay.m > 0:
		return "spend_per_day", l.SpendPerDay, true
	case l.SpendPerMonth.m > 0:
		return "spend_per_month", l.SpendPerMonth, true
	}
	return "", money{}, false
}

// checkPriced reports a *PolicyError on the money limit of an entry
// (field is the entry's path) whose calls prices does not price: its
// model, and every exact name charged to its budget (the models: of its
// account's entry; a family pattern cannot be checked name by name). A
// call the table does not price is charged no money, and the store
// refuses it on a money budget: better to say so before the first call.
func checkPriced(field string, key quota.Key, e policyEntry, shared []string, prices price.Table) error {
	axis, amount, ok := e.Limits.moneyLimit()
	if !ok {
		return nil
	}
	for _, model := range append([]string{key.Model}, shared...) {
		if strings.HasSuffix(model, "*") {
			continue
		}
		if _, priced := prices.Lookup(key.Provider, model); priced {
			continue
		}
		name := key.Provider + "/" + model
		return &PolicyError{Field: field + ".limits." + axis, Value: amount.raw,
			Problem: "limits spend on " + name + ", which the price table does not price",
			Fix:     "add prices." + name + " with its input and output prices per million tokens (see the README's money budgets)"}
	}
	return nil
}

// spendFallbacks returns the keys of the entries with spend_fallback, in
// file order, or a *PolicyError for one with no money limit, or with no
// fallback chain to move its calls to.
func spendFallbacks(entries []policyEntry, fallbacks map[string][]string) ([]quota.Key, error) {
	var out []quota.Key
	for i, e := range entries {
		if !e.SpendFallback {
			continue
		}
		field := fmt.Sprintf("policies[%d].spend_fallback", i)
		if _, _, ok := e.Limits.moneyLimit(); !ok {
			return nil, &PolicyError{Field: field, Value: "true", Problem: "is set on an entry with no money limit",
				Fix: "add limits.spend_per_day or limits.spend_per_month, or leave spend_fallback out"}
		}
		t := tollgate.Target{Provider: e.Provider, Account: e.Account, Model: e.Model}
		_, own := fallbacks[t.String()]
		t.Account = ""
		if _, def := fallbacks[t.String()]; !own && !def {
			return nil, &PolicyError{Field: field, Value: "true", Problem: "has no fallbacks to move the spent budget's calls to",
				Fix: "set fallbacks on the account-wide entry of " + tollgate.Target{Provider: e.Provider, Account: e.Account, Model: e.Model}.String() +
					", or leave spend_fallback out to fail its calls with " + tollgate.BudgetExhausted}
		}
		out = append(out, quota.Key{Provider: e.Provider, Account: e.Account, Model: e.Model, Tenant: e.Tenant})
	}
	return out, nil
}
