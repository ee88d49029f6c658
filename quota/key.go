package quota

import (
	"strconv"
	"strings"
)

// Key names one metered budget: a provider account's limits for one model,
// optionally split further by tenant. The zero Key is invalid.
type Key struct {
	// Provider is the API's vendor, e.g. "openai" or "anthropic". Required.
	Provider string
	// Account is the account, organisation or project the limits belong to.
	// Empty means the provider's default account.
	Account string
	// Model is the model the limits apply to, e.g. "gpt-4o". Required.
	Model string
	// Tenant, when set, names one of your own customers: a budget of its
	// own inside the account's when it has a policy (see Policies.Lookup
	// and Policies.Account), and a share of the account's when the
	// account is saturated (see Policies.Weight).
	Tenant string
}

// String returns "provider/account/model" with "/tenant" appended when Tenant
// is set; an empty Account prints as "default".
func (k Key) String() string {
	account := k.Account
	if account == "" {
		account = "default"
	}
	s := k.Provider + "/" + account + "/" + k.Model
	if k.Tenant != "" {
		s += "/" + k.Tenant
	}
	return s
}

// WithoutTenant returns k with Tenant cleared: the account-wide key.
func (k Key) WithoutTenant() Key {
	k.Tenant = ""
	return k
}

// Validate reports an *InvalidError naming the first bad field of k, or nil.
func (k Key) Validate() error {
	if k.Provider == "" {
		return invalid("key.provider", "", "is empty", `set the provider, e.g. "openai" or "anthropic"`)
	}
	if k.Model == "" {
		return invalid("key.model", "", "is empty", `set the model the limits apply to, e.g. "gpt-4o"`)
	}
	for _, f := range [...]struct{ name, v string }{
		{"key.provider", k.Provider}, {"key.account", k.Account}, {"key.model", k.Model}, {"key.tenant", k.Tenant},
	} {
		if i := strings.IndexFunc(f.v, badKeyRune); i >= 0 {
			return invalid(f.name, f.v, "contains "+strconv.QuoteRune(rune(f.v[i])),
				"use letters, digits and punctuation other than '/', '{', '}' and spaces")
		}
	}
	return nil
}

func badKeyRune(r rune) bool {
	return r == '/' || r == '{' || r == '}' || r <= ' ' || r == 0x7f
}

// Cost is what one call is charged, per resource. Daily axes are charged from
// Requests and Tokens, money budgets (SpendPerDay, SpendPerMonth) from Spend;
// the Concurrency axis takes one lease per ticket. All fields are
// non-negative.
type Cost struct {
	Requests     int64
	Tokens       int64
	InputTokens  int64
	OutputTokens int64
	// Spend is the call's price in Money's millionths (price.Price.Estimate of
	// the estimate when reserving, price.Price.Spend of the usage when
	// settling). A budget with a money limit refuses a cost with tokens
	// and no Spend: it would be charged nothing.
	Spend int64
}

// On returns the part of c charged against axis (0 for Concurrency).
func (c Cost) On(axis Axis) int64 {
	switch axis {
	case Requests, RequestsPerDay:
		return c.Requests
	case Tokens, TokensPerDay:
		return c.Tokens
	case InputTokens:
		return c.InputTokens
	case OutputTokens:
		return c.OutputTokens
	case SpendPerDay, SpendPerMonth:
		return c.Spend
	}
	return 0
}

// Validate reports an *InvalidError if any field of c is negative.
func (c Cost) Validate() error {
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"cost.requests", c.Requests}, {"cost.tokens", c.Tokens}, {"cost.input_tokens", c.InputTokens}, {"cost.output_tokens", c.OutputTokens}, {"cost.spend", c.Spend}} {
		if f.v < 0 {
			return invalid(f.name, strconv.FormatInt(f.v, 10), "is negative", "charge zero or more")
		}
	}
	return nil
}

// String prints the non-zero parts of c, e.g. "requests=1 tokens=1200".
func (c Cost) String() string {
	var b strings.Builder
	for _, a := range [...]Axis{Requests, Tokens, InputTokens, OutputTokens} {
		if v := c.On(a); v != 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(a.String())
			b.WriteByte('=')
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	if c.Spend != 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("spend=" + Money(c.Spend).String())
	}
	if b.Len() == 0 {
		return "free"
	}
	return b.String()
}

// Priority orders callers competing for one key. The zero value is Normal.
type Priority int8

const (
	// Normal callers may use the whole of a key's capacity.
	Normal Priority = 0
	// Low callers may not dip into the Policy's PriorityReserve.
	Low Priority = -1
)

// String returns "normal" or "low".
func (p Priority) String() string {
	if p == Low {
		return "low"
	}
	return "normal"
}
