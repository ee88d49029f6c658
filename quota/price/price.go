// Package price is the price table money budgets (quota.SpendPerDay,
// quota.SpendPerMonth) charge by: what a model costs per million tokens,
// uncached and cached input, cache writes and output, in quota.Money. The
// interceptor prices a call's estimate with it before the call (Estimate)
// and its usage after (Spend); Shipped is a dated default table.
package price

import (
	"math/bits"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/tune"
)

// invalid is a *quota.InvalidError naming field.
func invalid(field, value, problem, fix string) *quota.InvalidError {
	return &quota.InvalidError{Field: field, Value: value, Problem: problem, Fix: fix}
}

// Usage is what a call used as a provider bills it: its prompt's tokens,
// the parts of them read from and written to the prompt cache, and its
// answer's.
type Usage struct {
	// InputTokens is the whole prompt, cached parts included.
	InputTokens int64
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens
	// read from and written to the prompt cache.
	CacheReadTokens  int64
	CacheWriteTokens int64
	OutputTokens     int64
}

// Billed is implemented by the result of a governed activity that knows how
// its provider bills the call (for example activities.Response): the
// interceptor settles a money budget at Prices' price of it. A Metered
// result that is not Billed is priced from QuotaUsage as uncached input.
type Billed interface {
	quota.Metered
	QuotaBilled() Usage
}

// Price is what a model costs per million tokens, in quota.Money. A zero
// CachedInput or CacheWrite bills those tokens at Input.
type Price struct {
	Input       quota.Money
	CachedInput quota.Money
	CacheWrite  quota.Money
	Output      quota.Money
}

// Validate reports an *InvalidError naming the first bad field of p
// (field is the price's name in errors, e.g. "prices.openai/gpt-4o").
func (p Price) Validate(field string) error {
	for _, f := range [...]struct {
		name string
		v    quota.Money
	}{{"input", p.Input}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}, {"output", p.Output}} {
		if f.v < 0 {
			return invalid(field+"."+f.name, f.v.String(), "is negative", "give the provider's price per million tokens, e.g. 2.50")
		}
	}
	if p.Input == 0 && p.Output == 0 {
		return invalid(field, "0", "prices nothing", "give at least input and output per million tokens, e.g. input: 2.50, output: 10")
	}
	return nil
}

// Spend is what u costs at p, rounded up to a whole millionth.
func (p Price) Spend(u Usage) quota.Money {
	cached, write := p.CachedInput, p.CacheWrite
	if cached == 0 {
		cached = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	read, wrote := max(u.CacheReadTokens, 0), max(u.CacheWriteTokens, 0)
	plain := max(u.InputTokens-read-wrote, 0)
	var hi, lo uint64
	for _, part := range [...]struct {
		n     int64
		price quota.Money
	}{{plain, p.Input}, {read, cached}, {wrote, write}, {max(u.OutputTokens, 0), p.Output}} {
		h, l := bits.Mul64(uint64(part.n), uint64(part.price))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	if hi >= 1e6 { // more than 2^64 millionths: saturate
		return quota.Money(tune.MaxCapacity)
	}
	q, r := bits.Div64(hi, lo, 1e6)
	if r > 0 {
		q++
	}
	return quota.Money(min(q, uint64(tune.MaxCapacity)))
}

// Estimate is the most a call estimated at c may cost at p: its prompt at
// the dearer of the uncached and cache-write prices, its answer whole
// (c.OutputTokens, the call's max_tokens), so that settling can only
// refund.
func (p Price) Estimate(c quota.Cost) quota.Money {
	in := p
	if p.CacheWrite > p.Input {
		in.Input = p.CacheWrite
	}
	prompt := c.InputTokens
	if prompt == 0 && c.Tokens > c.OutputTokens {
		prompt = c.Tokens - c.OutputTokens
	}
	return in.Spend(Usage{InputTokens: prompt, OutputTokens: c.OutputTokens})
}

// Table is a price table: a Price per provider and model, where a model
// ending in "*" prices every model beginning with the rest (the longest
// such pattern wins; an exact name wins over any). The zero Table prices
// nothing. Build it with NewTable; it is a value, safe to copy and share.
type Table struct {
	exact    map[string]Price
	patterns []pricePattern // longest first
}

type pricePattern struct {
	provider, prefix string
	price            Price
}

// NewTable builds a table from "provider/model" names (model may end in
// "*") to prices, checking every entry.
func NewTable(m map[string]Price) (Table, error) {
	ps := Table{exact: make(map[string]Price, len(m))}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		p := m[name]
		field := "prices." + name
		provider, model, ok := strings.Cut(name, "/")
		if !ok || provider == "" || model == "" {
			return Table{}, invalid(field, name, "does not name a provider and model",
				"write provider/model, e.g. openai/gpt-4o or anthropic/claude-sonnet-4*")
		}
		if err := p.Validate(field); err != nil {
			return Table{}, err
		}
		if prefix, ok := strings.CutSuffix(model, "*"); ok {
			ps.patterns = append(ps.patterns, pricePattern{provider: provider, prefix: prefix, price: p})
			continue
		}
		ps.exact[name] = p
	}
	slices.SortStableFunc(ps.patterns, func(a, b pricePattern) int { return len(b.prefix) - len(a.prefix) })
	return ps, nil
}

// Lookup returns the price of provider's model, and whether the table has
// one.
func (ps Table) Lookup(provider, model string) (Price, bool) {
	if p, ok := ps.exact[provider+"/"+model]; ok {
		return p, true
	}
	for _, pt := range ps.patterns {
		if pt.provider == provider && strings.HasPrefix(model, pt.prefix) {
			return pt.price, true
		}
	}
	return Price{}, false
}

// Len returns how many entries the table has.
func (ps Table) Len() int { return len(ps.exact) + len(ps.patterns) }

// With returns a table holding ps's entries and m's, m's winning where both
// name the same provider and model.
func (ps Table) With(m map[string]Price) (Table, error) {
	all := make(map[string]Price, ps.Len()+len(m))
	for k, p := range ps.exact {
		all[k] = p
	}
	for _, pt := range ps.patterns {
		all[pt.provider+"/"+pt.prefix+"*"] = pt.price
	}
	for k, p := range m {
		all[k] = p
	}
	return NewTable(all)
}

// ShippedDate is when Shipped' figures were taken from the
// providers' public price pages. Prices change: check them, and override
// any in the policies file's prices (or Table.With).
const ShippedDate = "2025-11-01"

// Shipped returns the default price table, in US dollars per million
// tokens as published on ShippedDate (standard tier, prompts within
// each model's base context price, Anthropic's five-minute cache writes).
func Shipped() Table {
	d := quota.Dollars
	ps, err := NewTable(map[string]Price{
		"openai/gpt-4o":                 {Input: d(2.50), CachedInput: d(1.25), Output: d(10)},
		"openai/gpt-4o-mini":            {Input: d(0.15), CachedInput: d(0.075), Output: d(0.60)},
		"openai/gpt-4.1":                {Input: d(2), CachedInput: d(0.50), Output: d(8)},
		"openai/gpt-4.1-mini":           {Input: d(0.40), CachedInput: d(0.10), Output: d(1.60)},
		"openai/gpt-4.1-nano":           {Input: d(0.10), CachedInput: d(0.025), Output: d(0.40)},
		"openai/gpt-5":                  {Input: d(1.25), CachedInput: d(0.125), Output: d(10)},
		"openai/gpt-5-mini":             {Input: d(0.25), CachedInput: d(0.025), Output: d(2)},
		"openai/gpt-5-nano":             {Input: d(0.05), CachedInput: d(0.005), Output: d(0.40)},
		"openai/o3":                     {Input: d(2), CachedInput: d(0.50), Output: d(8)},
		"openai/o4-mini":                {Input: d(1.10), CachedInput: d(0.275), Output: d(4.40)},
		"anthropic/claude-opus-4-5*":    {Input: d(5), CachedInput: d(0.50), CacheWrite: d(6.25), Output: d(25)},
		"anthropic/claude-opus-4*":      {Input: d(15), CachedInput: d(1.50), CacheWrite: d(18.75), Output: d(75)},
		"anthropic/claude-sonnet-4*":    {Input: d(3), CachedInput: d(0.30), CacheWrite: d(3.75), Output: d(15)},
		"anthropic/claude-haiku-4-5*":   {Input: d(1), CachedInput: d(0.10), CacheWrite: d(1.25), Output: d(5)},
		"anthropic/claude-3-5-haiku*":   {Input: d(0.80), CachedInput: d(0.08), CacheWrite: d(1), Output: d(4)},
		"gemini/gemini-2.5-pro*":        {Input: d(1.25), CachedInput: d(0.125), Output: d(10)},
		"gemini/gemini-2.5-flash-lite*": {Input: d(0.10), CachedInput: d(0.01), Output: d(0.40)},
		"gemini/gemini-2.5-flash*":      {Input: d(0.30), CachedInput: d(0.03), Output: d(2.50)},
		"gemini/gemini-2.0-flash*":      {Input: d(0.10), CachedInput: d(0.025), Output: d(0.40)},
	})
	if err != nil {
		panic("price: shipped table: " + err.Error()) // a test covers it
	}
	return ps
}
