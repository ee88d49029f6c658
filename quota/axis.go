package quota

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/quota/internal/tune"
)

// Axis names one dimension a provider meters. The zero Axis is invalid.
type Axis uint8

// The axes. Requests, Tokens, InputTokens and OutputTokens are continuously
// refilling token buckets; RequestsPerDay and TokensPerDay are fixed windows
// that reset at midnight in the limit's time zone; Concurrency counts calls in
// flight, each holding a lease that expires if its holder never returns it.
// SpendPerDay and SpendPerMonth are money budgets (Cost.Spend, in Money's
// micro-units): fixed windows of a calendar day, or month, in the limit's
// zone.
const (
	Requests Axis = iota + 1
	Tokens
	InputTokens
	OutputTokens
	RequestsPerDay
	TokensPerDay
	Concurrency
	SpendPerDay
	SpendPerMonth

	numAxes = int(SpendPerMonth)
)

var axisNames = [...]string{
	Requests:       "requests",
	Tokens:         "tokens",
	InputTokens:    "input_tokens",
	OutputTokens:   "output_tokens",
	RequestsPerDay: "requests_per_day",
	TokensPerDay:   "tokens_per_day",
	Concurrency:    "concurrency",
	SpendPerDay:    "spend_per_day",
	SpendPerMonth:  "spend_per_month",
}

// Axes lists every valid axis in a fixed order (the order Snapshot reports in).
func Axes() []Axis {
	return []Axis{Requests, Tokens, InputTokens, OutputTokens, RequestsPerDay, TokensPerDay, Concurrency, SpendPerDay, SpendPerMonth}
}

// String returns the axis's name as used in configuration, metrics and errors
// ("requests", "input_tokens", …), or "axis(N)" for an invalid value.
func (a Axis) String() string {
	if a.Valid() {
		return axisNames[a]
	}
	return "axis(" + strconv.Itoa(int(a)) + ")"
}

// Valid reports whether a is one of the defined axes.
func (a Axis) Valid() bool { return a >= Requests && a <= SpendPerMonth }

// Spend reports whether a is a money budget (SpendPerDay, SpendPerMonth).
func (a Axis) Spend() bool { return a == SpendPerDay || a == SpendPerMonth }

// Kind says how an axis refills.
func (a Axis) Kind() Kind {
	switch a {
	case Requests, Tokens, InputTokens, OutputTokens:
		return Bucket
	case RequestsPerDay, TokensPerDay, SpendPerDay:
		return DailyWindow
	case SpendPerMonth:
		return MonthlyWindow
	case Concurrency:
		return Leases
	}
	return 0
}

// ParseAxis returns the axis named s (as printed by Axis.String).
func ParseAxis(s string) (Axis, error) {
	for a := Requests; a <= SpendPerMonth; a++ {
		if axisNames[a] == s {
			return a, nil
		}
	}
	return 0, invalid("axis", s, "is not a known axis",
		"use one of requests, tokens, input_tokens, output_tokens, requests_per_day, tokens_per_day, concurrency, spend_per_day, spend_per_month")
}

// Kind is how an axis's budget comes back.
type Kind uint8

// The kinds of axis.
const (
	// Bucket refills continuously: Capacity units per Period, never holding
	// more than Capacity (a full bucket earns nothing while idle).
	Bucket Kind = iota + 1
	// DailyWindow allows Capacity units per calendar day in Location and
	// resets at that zone's midnight.
	DailyWindow
	// Leases allows Capacity calls in flight at once.
	Leases
	// MonthlyWindow allows Capacity units per calendar month in Location
	// and resets at midnight of the month's first day in that zone.
	MonthlyWindow
)

// Windowed reports whether k is a fixed calendar window (DailyWindow or
// MonthlyWindow): used units that reset at the window's end.
func (k Kind) Windowed() bool { return k == DailyWindow || k == MonthlyWindow }

// Limit is one axis's budget. Build it with PerSecond, PerMinute, Per, PerDay
// or Concurrent; the zero Limit is invalid. Limits are values: copy freely.
// A Limit remembers which kind of constructor built it, so Validate can tell
// quota.Per(quota.RequestsPerDay, …) from a daily limit; a Limit written as
// a literal is judged by its Axis alone.
type Limit struct {
	// Axis is the dimension limited.
	Axis Axis
	// Capacity is the burst size of a Bucket, the units per day of a
	// DailyWindow, or the number of concurrent calls for Leases.
	Capacity int64
	// Period is the time a Bucket takes to refill from empty to Capacity.
	// Unused for the other kinds.
	Period time.Duration
	// Burst is, for a Bucket, how much of the limit may start at once, as
	// the time the limit takes to earn it: a Burst of 1s on 600 requests
	// per minute lets 10 calls start together, and the rest follow at the
	// limit's rate (see BurstTime, and burst.go for why). A burst is never
	// less than one call: a call larger than it starts alone. Zero means
	// Period/60 (1s of a per-minute limit); Period lets the
	// whole limit start at once. Unused for the other kinds.
	Burst time.Duration
	// Location is the time zone whose midnight resets a DailyWindow; nil
	// means UTC. Unused for the other kinds.
	Location *time.Location

	// built is the kind of limit the constructor made, 0 for a literal.
	built Kind
}

// minPeriod is the shortest Period a Bucket may have: stores keep time in
// microseconds, and a shorter period would refill differently in each.
const minPeriod = time.Millisecond

// Per returns a bucket limit of n units of axis per period (capacity n, refilled
// continuously at n/period). axis must be Requests, Tokens, InputTokens or
// OutputTokens, and period at least a millisecond; otherwise Validate reports an
// *InvalidError.
func Per(axis Axis, n int64, period time.Duration) Limit {
	return Limit{Axis: axis, Capacity: n, Period: period, built: Bucket}
}

// PerSecond returns Per(axis, n, time.Second).
func PerSecond(axis Axis, n int64) Limit { return Per(axis, n, time.Second) }

// PerMinute returns Per(axis, n, time.Minute): the way providers state their
// limits (RPM, TPM, ITPM, OTPM).
func PerMinute(axis Axis, n int64) Limit { return Per(axis, n, time.Minute) }

// PerDay returns a daily window of n units that resets at midnight in loc (nil
// means UTC). resource is Requests or Tokens; the limit's axis is
// RequestsPerDay or TokensPerDay accordingly (those may be passed too).
// Providers meter no other axis by the day: for any other, Validate reports
// an *InvalidError.
func PerDay(resource Axis, n int64, loc *time.Location) Limit {
	axis := resource
	switch resource {
	case Requests:
		axis = RequestsPerDay
	case Tokens:
		axis = TokensPerDay
	}
	return Limit{Axis: axis, Capacity: n, Location: loc, built: DailyWindow}
}

// DailySpend returns a money budget of m per calendar day in loc (nil means
// UTC), charged from Cost.Spend and reset at the zone's midnight.
func DailySpend(m Money, loc *time.Location) Limit {
	return Limit{Axis: SpendPerDay, Capacity: int64(m), Location: loc, built: DailyWindow}
}

// MonthlySpend returns a money budget of m per calendar month in loc (nil
// means UTC), charged from Cost.Spend and reset at midnight of the month's
// first day in that zone.
func MonthlySpend(m Money, loc *time.Location) Limit {
	return Limit{Axis: SpendPerMonth, Capacity: int64(m), Location: loc, built: MonthlyWindow}
}

// Window returns the calendar window of a DailyWindow or MonthlyWindow
// limit that holds t: [start, end) in the limit's zone. Other kinds return
// zero times.
func (l Limit) Window(t time.Time) (start, end time.Time) {
	loc := l.Zone()
	y, m, d := t.In(loc).Date()
	switch l.Axis.Kind() {
	case DailyWindow:
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case MonthlyWindow:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	}
	return time.Time{}, time.Time{}
}

// Concurrent returns a limit of n calls in flight at once.
func Concurrent(n int64) Limit { return Limit{Axis: Concurrency, Capacity: n, built: Leases} }

// Rate returns a Bucket's refill rate in units per second (0 for other kinds).
func (l Limit) Rate() float64 {
	if l.Axis.Kind() != Bucket || l.Period <= 0 {
		return 0
	}
	return float64(l.Capacity) / l.Period.Seconds()
}

// Zone returns the limit's time zone, UTC when Location is nil.
func (l Limit) Zone() *time.Location {
	if l.Location == nil {
		return time.UTC
	}
	return l.Location
}

// String describes the limit: "90000 tokens/1m0s", "10000 requests_per_day
// (America/Los_Angeles)", "20 concurrency".
func (l Limit) String() string {
	switch l.Axis.Kind() {
	case Bucket:
		if l.Burst > 0 {
			return fmt.Sprintf("%d %s/%s (burst %s)", l.Capacity, l.Axis, l.Period, l.Burst)
		}
		return fmt.Sprintf("%d %s/%s", l.Capacity, l.Axis, l.Period)
	case DailyWindow, MonthlyWindow:
		if l.Axis.Spend() {
			return fmt.Sprintf("%s %s (%s)", Money(l.Capacity), l.Axis, l.Zone())
		}
		return fmt.Sprintf("%d %s (%s)", l.Capacity, l.Axis, l.Zone())
	default:
		return fmt.Sprintf("%d %s", l.Capacity, l.Axis)
	}
}

// Validate reports the first thing wrong with l as an *InvalidError naming the
// field, or nil: an unknown axis, an axis its constructor cannot limit, a
// capacity outside [1, 2^50], or a Bucket's period shorter than a millisecond.
func (l Limit) Validate() error {
	if !l.Axis.Valid() {
		return invalid("limit.axis", l.Axis.String(), "is not a known axis",
			"build limits with quota.PerMinute, quota.PerDay or quota.Concurrent")
	}
	if l.built != 0 && l.built != l.Axis.Kind() {
		return l.wrongAxis()
	}
	if l.Capacity <= 0 && l.Axis.Spend() {
		return invalid("limit."+l.Axis.String()+".capacity", Money(l.Capacity).String(),
			"must be a positive amount", "set the budget in the price table's currency, e.g. quota.Dollars(50)")
	}
	if l.Capacity <= 0 {
		return invalid("limit."+l.Axis.String()+".capacity", strconv.FormatInt(l.Capacity, 10),
			"must be a positive whole number", "set the provider's published limit, e.g. 90000")
	}
	if l.Capacity > maxCapacity {
		return invalid("limit."+l.Axis.String()+".capacity", strconv.FormatInt(l.Capacity, 10),
			"is too large", fmt.Sprintf("keep capacities at or below %d", int64(maxCapacity)))
	}
	if l.Axis.Kind() == Bucket {
		if l.Period <= 0 {
			return invalid("limit."+l.Axis.String()+".period", l.Period.String(),
				"must be positive", "use quota.PerMinute or a period such as 1m")
		}
		if l.Period < minPeriod {
			return invalid("limit."+l.Axis.String()+".period", l.Period.String(),
				"is shorter than a millisecond", "use a period of at least a millisecond, e.g. 1s with the capacity scaled to it")
		}
		if l.Burst < 0 || l.Burst > l.Period {
			return invalid("limit."+l.Axis.String()+".burst", l.Burst.String(),
				"is not within the limit's period ("+l.Period.String()+")",
				"use a duration such as 1s (one second's worth of the limit at once), the period to let the whole limit go at once, or 0 for the default")
		}
	} else if l.Burst != 0 {
		return invalid("limit."+l.Axis.String()+".burst", l.Burst.String(),
			"is set on a limit that does not refill", "set burst only on per-minute (or per-period) limits")
	}
	return nil
}

// wrongAxis explains a limit whose constructor cannot limit its axis.
func (l Limit) wrongAxis() error {
	var fix string
	switch l.Axis.Kind() {
	case DailyWindow:
		fix = "for a daily limit use quota.PerDay(quota.Requests, n, zone) or quota.PerDay(quota.Tokens, n, zone)"
		if l.Axis == SpendPerDay {
			fix = "for a daily money budget use quota.DailySpend(amount, zone)"
		}
	case MonthlyWindow:
		fix = "for a monthly money budget use quota.MonthlySpend(amount, zone)"
	case Leases:
		fix = "for calls in flight use quota.Concurrent(n)"
	default:
		fix = "limit " + l.Axis.String() + " per period with quota.PerMinute, quota.PerSecond or quota.Per"
	}
	var problem string
	switch l.built {
	case Bucket:
		problem = "does not refill over a period: quota.Per, PerSecond and PerMinute take requests, tokens, input_tokens or output_tokens"
	case DailyWindow:
		problem = "has no daily limit: quota.PerDay takes requests or tokens, quota.DailySpend money"
	case MonthlyWindow:
		problem = "has no monthly limit: quota.MonthlySpend takes money"
	default:
		problem = "is not concurrency: quota.Concurrent limits calls in flight"
	}
	return invalid("limit.axis", l.Axis.String(), problem, fix)
}

// maxCapacity keeps every level exactly representable (tune.MaxCapacity).
const maxCapacity = tune.MaxCapacity
