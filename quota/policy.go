package quota

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Defaults for Policy's zero fields.
const (
	// DefaultMaxWait bounds how far ahead a queued ticket may reserve.
	DefaultMaxWait = 5 * time.Minute
	// DefaultLeaseTTL is how long a concurrency lease lives if its holder
	// never settles it (a crashed worker).
	DefaultLeaseTTL = 10 * time.Minute
	// DefaultLeaseRetry is the wait suggested when every concurrency slot is
	// taken, capped by the earliest lease expiry.
	DefaultLeaseRetry = time.Second
)

// Policy is the budget of one Key. Its zero fields take the documented
// defaults; a Policy is a value and safe to copy (copies share its
// TenantWeights map, which is read, never written, once given to
// NewPolicies).
type Policy struct {
	// Limits are the axes metered, at most one per axis. A key with a Policy
	// but no Limits is admitted freely.
	Limits []Limit
	// Headroom is the fraction of every axis's capacity kept unused, in
	// [0, 1): 0.1 budgets 90% of what the provider allows. Default 0.
	Headroom float64
	// PriorityReserve is the fraction of every axis's (headroom-reduced)
	// capacity that Low priority callers may not dip into, in [0, 1).
	// Default 0.
	PriorityReserve float64
	// MaxWait bounds the line: a ticket that would have to wait longer is
	// refused (told the wait, given no place). Default DefaultMaxWait.
	MaxWait time.Duration
	// LeaseTTL is the longest a grant, with its concurrency lease, lives
	// without being renewed or settled (a caller may ask for less, see
	// Reservation.LeaseTTL), and how long a queued ticket waits for its
	// caller once mature before it lapses and its charge is refunded.
	// Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// AdoptObservedLimits lets Observe replace an axis's capacity with the
	// limit the provider reports (less Headroom). Off by default: Observe
	// then only caps the level at what the provider says remains.
	AdoptObservedLimits bool
	// Calibration is how the key learns what its provider counts per
	// estimated prompt token (see Calibration). The zero value learns.
	// A tenant nested in an account's budget is calibrated by the
	// account's: the provider counts per account.
	Calibration Calibration
	// Weight is, on a tenant's policy, the tenant's share of its account
	// when the account's budget is saturated: places in line go to
	// tenants in proportion to their weights, by cost. 0 means 1; a
	// non-zero weight lies in [MinWeight, MaxWeight]. An account-wide
	// policy may not set it (see TenantWeights).
	Weight float64
	// TenantWeights gives, on an account-wide policy, the weights of
	// tenants that have no policy of their own, by tenant name (a tenant
	// not named has weight 1; untenanted calls count as one more tenant
	// of weight 1). Each weight lies in [MinWeight, MaxWeight]. A tenant
	// with a policy of its own sets Weight there instead. NewPolicies
	// copies the map: a Policy read back from Policies must be treated as
	// read-only.
	TenantWeights map[string]float64
	// Models are further model names charged to this budget, as providers
	// meter them: Anthropic a model family's versions against one limit,
	// Gemini a project's models. A call on the same provider and account
	// (any tenant) naming one of them is charged here (Policies.Lookup
	// resolves it to this key). A name ending in "*" is a family pattern:
	// it matches every model beginning with the rest. A model with a
	// policy of its own is charged there; otherwise an exact name wins
	// over a pattern and a longer pattern over a shorter one. Only an
	// account-wide policy (no Tenant) may set it; NewPolicies copies the
	// slice.
	Models []string
}

// Bounds of a tenant's weight (Policy.Weight, Policy.TenantWeights): a
// million to one either way keeps the fair-share arithmetic exact enough.
const (
	MinWeight = 1e-6
	MaxWeight = 1e6
)

// Limit returns the policy's limit on axis and whether there is one.
func (p Policy) Limit(axis Axis) (Limit, bool) {
	for _, l := range p.Limits {
		if l.Axis == axis {
			return l, true
		}
	}
	return Limit{}, false
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.MaxWait == 0 {
		p.MaxWait = DefaultMaxWait
	}
	if p.LeaseTTL == 0 {
		p.LeaseTTL = DefaultLeaseTTL
	}
	p.Calibration = p.Calibration.WithDefaults()
	return p
}

// Validate reports an *InvalidError naming the first bad field of p, or nil.
func (p Policy) Validate() error {
	var seen [numAxes + 1]bool
	for _, l := range p.Limits {
		if err := l.Validate(); err != nil {
			return err
		}
		if seen[l.Axis] {
			return invalid("limit."+l.Axis.String(), l.String(), "is given twice", "keep one limit per axis")
		}
		seen[l.Axis] = true
	}
	if !(p.Headroom >= 0 && p.Headroom < 1) { // also rejects NaN
		return invalid("headroom", strconv.FormatFloat(p.Headroom, 'g', -1, 64),
			"must be in [0, 1)", "use a fraction such as 0.1 to keep 10% unused")
	}
	if !(p.PriorityReserve >= 0 && p.PriorityReserve < 1) {
		return invalid("priority_reserve", strconv.FormatFloat(p.PriorityReserve, 'g', -1, 64),
			"must be in [0, 1)", "use a fraction such as 0.2 to keep 20% for normal priority")
	}
	if p.MaxWait < 0 {
		return invalid("max_wait", p.MaxWait.String(), "is negative", "use 0 for the default or a positive duration")
	}
	if p.LeaseTTL < 0 {
		return invalid("lease_ttl", p.LeaseTTL.String(), "is negative", "use 0 for the default or a positive duration")
	}
	if err := p.Calibration.Validate(); err != nil {
		return err
	}
	if p.Weight != 0 {
		if err := validWeight("weight", p.Weight); err != nil {
			return err
		}
	}
	for _, name := range sortedNames(p.TenantWeights) {
		if err := validTenantName(name); err != nil {
			return err
		}
		if err := validWeight("tenant_weights."+name, p.TenantWeights[name]); err != nil {
			return err
		}
	}
	for _, l := range p.Limits {
		if eff := p.Effective(l.Capacity); eff < 1 {
			return invalid("headroom", strconv.FormatFloat(p.Headroom, 'g', -1, 64),
				fmt.Sprintf("leaves %s no capacity", l), "lower the headroom or raise the limit")
		}
	}
	return nil
}

// validWeight reports an *InvalidError naming field unless w is a weight
// in [MinWeight, MaxWeight].
func validWeight(field string, w float64) error {
	if w >= MinWeight && w <= MaxWeight { // also rejects NaN
		return nil
	}
	return invalid(field, strconv.FormatFloat(w, 'g', -1, 64), "is not in [0.000001, 1000000]",
		"use a positive share such as 2 for twice an ordinary tenant's; leave it out for the default, 1")
}

// validTenantName reports an *InvalidError for a name in TenantWeights
// that no Key.Tenant could have.
func validTenantName(name string) error {
	if name == "" {
		return invalid("tenant_weights", name, "names no tenant",
			"name a tenant; untenanted calls always weigh 1")
	}
	if i := strings.IndexFunc(name, badKeyRune); i >= 0 {
		return invalid("tenant_weights", name, "contains "+strconv.QuoteRune(rune(name[i])),
			"name the tenant as its keys do: letters, digits and punctuation other than '/', '{', '}' and spaces")
	}
	return nil
}

func sortedNames(m map[string]float64) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Effective returns capacity less Headroom, rounded down: what the store
// budgets for an axis whose provider limit is capacity. Headroom counts as
// the shortest decimal that prints it (0.3, not the binary fraction nearest
// to it), so a product that is whole in decimal is exact: 90000 less 0.3 is
// 63000, not 62999. A capacity below 1 is returned as is.
func (p Policy) Effective(capacity int64) int64 {
	if capacity < 1 || p.Headroom == 0 {
		return capacity
	}
	if !(p.Headroom > 0 && p.Headroom < 1) { // an invalid policy: Validate says why
		return int64(math.Floor(float64(capacity) * (1 - p.Headroom)))
	}
	// Headroom is digits × 10^-scale; the budget is capacity × (10^scale -
	// digits) / 10^scale, rounded down, in integers.
	var buf [32]byte
	digits, scale := decimal(strconv.AppendFloat(buf[:0], p.Headroom, 'e', -1, 64))
	if scale < len(pow10) {
		hi, lo := bits.Mul64(uint64(capacity), pow10[scale]-digits)
		q, _ := bits.Div64(hi, lo, pow10[scale]) // q <= capacity: no overflow
		return int64(q)
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)
	num := new(big.Int).Sub(den, new(big.Int).SetUint64(digits))
	num.Mul(num, big.NewInt(capacity))
	return num.Quo(num, den).Int64()
}

// pow10 holds the powers of ten that fit a uint64.
var pow10 = func() []uint64 {
	p := []uint64{1}
	for len(p) < 20 {
		p = append(p, p[len(p)-1]*10)
	}
	return p
}()

// decimal reads a positive float formatted by strconv with 'e' and
// precision -1 ("3e-01", "3.333333333333333e-01") as digits × 10^-scale.
// Such a float in (0, 1) has at most 17 digits and a negative exponent, so
// digits fits a uint64 and scale is positive.
func decimal(b []byte) (digits uint64, scale int) {
	e := bytes.IndexByte(b, 'e')
	n := 0
	for _, c := range b[:e] {
		if c != '.' {
			digits = digits*10 + uint64(c-'0')
			n++
		}
	}
	exp, _ := strconv.Atoi(string(b[e+1:]))
	return digits, n - 1 - exp
}

// Policies maps keys to their policies. Build it with NewPolicies; the zero
// value holds none. It is read-only after construction and safe for
// concurrent use.
type Policies struct {
	byKey map[Key]Policy
	// shared resolves the model names charged to another key's budget
	// (Policy.Models), per provider and account.
	shared map[account]*sharedModels
}

// NewPolicies validates every entry and returns the set. Each key must be
// valid; a key with a Tenant gives that tenant a budget of its own, nested
// in its account's when the account-wide key has a policy too. Weight may
// be set on tenants' policies only, TenantWeights on account-wide ones, and
// a tenant is weighed in one place: TenantWeights may not name a tenant
// with a policy of its own. Errors are *InvalidError, wrapped with the key.
func NewPolicies(m map[Key]Policy) (Policies, error) {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	byKey := make(map[Key]Policy, len(m))
	for _, k := range keys {
		if err := k.Validate(); err != nil {
			return Policies{}, fmt.Errorf("policy %s: %w", k, err)
		}
		p := m[k]
		if err := p.Validate(); err != nil {
			return Policies{}, fmt.Errorf("policy %s: %w", k, err)
		}
		if err := nesting(k, p, m); err != nil {
			return Policies{}, fmt.Errorf("policy %s: %w", k, err)
		}
		if p.TenantWeights != nil {
			p.TenantWeights = maps.Clone(p.TenantWeights)
		}
		if p.Models != nil {
			p.Models = slices.Clone(p.Models)
		}
		byKey[k] = p.WithDefaults()
	}
	shared, err := sharedIndex(keys, byKey)
	if err != nil {
		return Policies{}, err
	}
	return Policies{byKey: byKey, shared: shared}, nil
}

// nesting reports an *InvalidError for a weight given where it means
// nothing, or given twice, for the policy p of k among m.
func nesting(k Key, p Policy, m map[Key]Policy) error {
	if k.Tenant == "" && p.Weight != 0 {
		return invalid("weight", strconv.FormatFloat(p.Weight, 'g', -1, 64), "is set on an account-wide policy",
			"weigh tenants on their own policies (weight) or on this one (tenant_weights)")
	}
	if k.Tenant != "" && len(p.TenantWeights) > 0 {
		return invalid("tenant_weights", k.Tenant, "is set on a tenant's policy",
			"set tenant_weights on the account-wide policy, or weight on this one")
	}
	for _, name := range sortedNames(p.TenantWeights) {
		t := k
		t.Tenant = name
		if _, ok := m[t]; ok {
			return invalid("tenant_weights."+name, strconv.FormatFloat(p.TenantWeights[name], 'g', -1, 64),
				"names a tenant with a policy of its own", "set weight on the tenant's policy instead")
		}
	}
	return nil
}

// Lookup returns the key whose budget k is charged against first and its
// policy: k itself when it has a policy, else, for a key with a Tenant, the
// account-wide key without it. ok is false when neither has a policy. A
// tenant's own budget may be nested in its account's (see Account), which
// its calls are charged to as well.
func (ps Policies) Lookup(k Key) (bucket Key, p Policy, ok bool) {
	if p, ok := ps.byKey[k]; ok {
		return k, p, true
	}
	k = ps.resolve(k)
	if p, ok := ps.byKey[k]; ok {
		return k, p, true
	}
	if k.Tenant != "" {
		k = k.WithoutTenant()
		if p, ok := ps.byKey[k]; ok {
			return k, p, true
		}
	}
	return Key{}, Policy{}, false
}

// Account returns the account-wide key k is nested in and its policy: for
// a key with a Tenant whose account-wide key has a policy, every call on k
// is charged to that budget too (after the tenant's own, when it has one),
// and a Pause or Observe of it stops or lowers every tenant under it. ok is
// false for an untenanted key, or when the account has no policy.
func (ps Policies) Account(k Key) (account Key, p Policy, ok bool) {
	if k.Tenant == "" {
		return Key{}, Policy{}, false
	}
	k = ps.resolve(k.WithoutTenant())
	if p, ok := ps.byKey[k]; ok {
		return k, p, true
	}
	return Key{}, Policy{}, false
}

// Weight returns the share weight of k's tenant when its account's budget
// is saturated: the Weight of the tenant's own policy, else its entry in
// the account's TenantWeights, else 1. Untenanted keys weigh 1.
func (ps Policies) Weight(k Key) float64 {
	if k.Tenant == "" {
		return 1
	}
	if _, ok := ps.byKey[k]; !ok {
		k = ps.resolve(k)
	}
	if p, ok := ps.byKey[k]; ok && p.Weight != 0 {
		return p.Weight
	}
	if p, ok := ps.byKey[k.WithoutTenant()]; ok {
		if w, ok := p.TenantWeights[k.Tenant]; ok {
			return w
		}
	}
	return 1
}

// Keys returns every key with a policy, sorted by String.
func (ps Policies) Keys() []Key {
	keys := make([]Key, 0, len(ps.byKey))
	for k := range ps.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}
