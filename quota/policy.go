package quota

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"sort"
	"strconv"
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
// defaults; a Policy is a value and safe to copy.
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
	// LeaseTTL is how long a concurrency lease lives without being settled.
	// Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// AdoptObservedLimits lets Observe replace an axis's capacity with the
	// limit the provider reports (less Headroom). Off by default: Observe
	// then only caps the level at what the provider says remains.
	AdoptObservedLimits bool
	// Calibration is how the key learns what its provider counts per
	// estimated prompt token (see Calibration). The zero value learns.
	Calibration Calibration
}

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
	for _, l := range p.Limits {
		if eff := p.Effective(l.Capacity); eff < 1 {
			return invalid("headroom", strconv.FormatFloat(p.Headroom, 'g', -1, 64),
				fmt.Sprintf("leaves %s no capacity", l), "lower the headroom or raise the limit")
		}
	}
	return nil
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

// Reserved returns the part of an effective capacity kept from Low priority
// callers.
func (p Policy) Reserved(effective int64) float64 {
	return float64(effective) * p.PriorityReserve
}

// Policies maps keys to their policies. Build it with NewPolicies; the zero
// value holds none. It is read-only after construction and safe for
// concurrent use.
type Policies struct {
	byKey map[Key]Policy
}

// NewPolicies validates every entry and returns the set. Each key must be
// valid; a key with a Tenant gives that tenant a budget of its own.
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
		byKey[k] = p.WithDefaults()
	}
	return Policies{byKey: byKey}, nil
}

// Lookup returns the key whose budget k is charged against and its policy:
// k itself when it has a policy, else, for a key with a Tenant, the
// account-wide key without it. ok is false when neither has a policy.
func (ps Policies) Lookup(k Key) (bucket Key, p Policy, ok bool) {
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

// Keys returns every key with a policy, sorted by String.
func (ps Policies) Keys() []Key {
	keys := make([]Key, 0, len(ps.byKey))
	for k := range ps.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}
