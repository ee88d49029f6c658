package redis

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Kinds as the script numbers them.
const (
	kindBucket = "1"
	kindDaily  = "2"
	kindLeases = "3"
)

// dailySpan is how many midnights are passed per daily axis: from two days
// before the caller's clock to three days after, so the script finds the
// window containing Redis TIME even if the caller's clock is a day off.
const dailySpan = 6

// keyState is what a Store precomputes for one policy key: its Redis keys and
// the static part of the script's arguments, so a call allocates little.
type keyState struct {
	key    quota.Key
	policy quota.Policy
	state  string // the key's hash
	leases string // its lease zset
	queue  string // its zset of queued tickets, by expiry
	ticket string // prefix of its ticket records
	// static is ARGV[3:] up to the daily midnights (see lua.go).
	static []any
	// zones are the time zones of the daily limits, in the order the
	// script reads their midnights.
	zones []*time.Location
	// limited lists the policy's axes in quota.Axes() order.
	limited []quota.Axis
	daily   atomic.Pointer[dailyArgs]
	// calibrates is false when the policy's Calibration is Off; calib is
	// then ("0", "0", "0"), else its bounds and half-life in µs, as the
	// script's reserve, settle and snapshot read them.
	calibrates bool
	calib      [3]any
	// epoch is the epoch of the key's state this store last saw ("" for
	// none) and seen, per daily limit, the window it last saw ("start
	// used", or ""), as the script's reserve reply gave them: passed back
	// as they are, so that a script finding the state lost recovers it from
	// what was known (see lua.go), at no cost to a call. name is the
	// store's name for an epoch it begins.
	epoch atomic.Value
	seen  []atomic.Value
	name  any
}

// dailyArgs caches the midnights of every daily limit for one stretch of the
// caller's clock: [from, to) in unix µs.
type dailyArgs struct {
	from, to int64
	args     []any
}

func newKeyState(prefix string, k quota.Key, p quota.Policy, name string) *keyState {
	tag := prefix + ":{" + k.String() + "}"
	ks := &keyState{key: k, policy: p, state: tag, leases: tag + ":leases", queue: tag + ":queue", ticket: tag + ":t:", name: name}
	ks.epoch.Store("")
	adopt := "0"
	if p.AdoptObservedLimits {
		adopt = "1"
	}
	ks.static = []any{
		micros(p.MaxWait),
		micros(p.LeaseTTL),
		strconv.FormatFloat(p.PriorityReserve, 'g', -1, 64),
		adopt,
		"", // count, set below
	}
	n := 0
	for _, a := range quota.Axes() {
		l, ok := p.Limit(a)
		if !ok {
			continue
		}
		n++
		ks.limited = append(ks.limited, a)
		kind, period := kindBucket, micros(l.Period)
		switch a.Kind() {
		case quota.DailyWindow:
			kind, period = kindDaily, "0"
			ks.zones = append(ks.zones, l.Zone())
		case quota.Leases:
			kind, period = kindLeases, "0"
		}
		ks.static = append(ks.static, axisID(a), kind, strconv.FormatInt(p.Effective(l.Capacity), 10), period)
	}
	ks.static[4] = strconv.Itoa(n)
	ks.seen = make([]atomic.Value, len(ks.zones))
	for i := range ks.seen {
		ks.seen[i].Store("")
	}
	ks.calib = [3]any{"0", "0", "0"}
	if c := p.Calibration; !c.Off {
		ks.calibrates = true
		ks.calib = [3]any{strconv.FormatFloat(c.MinRatio, 'g', -1, 64), strconv.FormatFloat(c.MaxRatio, 'g', -1, 64), micros(c.HalfLife)}
	}
	return ks
}

// prompt is the prompt size the script calibrates: 0 when the policy's
// calibration is off.
func (ks *keyState) prompt(p int64) int64 {
	if !ks.calibrates {
		return 0
	}
	return p
}

// keys returns the script's KEYS for a call about ticket ("" for none).
func (ks *keyState) keys(ticket string) []string {
	t := ks.state // any key of the same slot
	if ticket != "" {
		t = ks.ticket + ticket
	}
	return []string{ks.state, ks.leases, t, ks.queue}
}

// ttl is the script's argument for a grant asked to live ttl: µs, at most
// the policy's LeaseTTL (which 0 means), precomputed in that case.
func (ks *keyState) ttl(ttl time.Duration) any {
	if ttl <= 0 || ttl >= ks.policy.LeaseTTL {
		return ks.static[1]
	}
	return micros(ttl)
}

// args returns the script's ARGV for op at the caller's clock reading now,
// with room for extra op arguments. op is an interface so that the constant
// each caller passes is boxed without allocating.
func (ks *keyState) args(op any, now string, local time.Time, extra int) []any {
	daily := ks.dailyArgs(local)
	args := make([]any, 0, 4+len(ks.static)+len(daily)+len(ks.seen)+extra)
	args = append(args, op, now)
	args = append(args, ks.static...)
	args = append(args, daily...)
	args = append(args, ks.epoch.Load(), ks.name)
	for i := range ks.seen {
		args = append(args, ks.seen[i].Load())
	}
	return args
}

// remember keeps what a reserve reply says of the key's state (see lua.go's
// reply): its epoch, when the store did not know it (else 0), and its daily
// windows.
func (ks *keyState) remember(res []any) {
	if e, ok := res[0].(string); ok && e != "" {
		ks.epoch.Store(res[0])
	}
	for i := range ks.seen {
		if _, ok := res[1+i].(string); ok {
			ks.seen[i].Store(res[1+i])
		}
	}
}

// observations appends obs to args as the script's observe reads them (a
// count, then axis, adopted capacity or -1, remaining or -1 for each), and
// returns them with that count. Observations of axes the policy does not
// limit, and of concurrency, are left out.
func (ks *keyState) observations(args []any, obs []quota.Observation) ([]any, int) {
	at := len(args)
	args = append(args, "")
	m := 0
	for _, o := range obs {
		if _, ok := ks.policy.Limit(o.Axis); !ok || o.Axis.Kind() == quota.Leases {
			continue
		}
		// A limit headroom leaves less than one unit of is not adopted: no
		// valid policy could give it.
		adopt := int64(-1)
		if ks.policy.AdoptObservedLimits && o.Limit >= 1 {
			if eff := ks.policy.Effective(min(o.Limit, maxCapacity)); eff >= 1 {
				adopt = eff
			}
		}
		args = append(args, axisID(o.Axis), adopt, o.Remaining)
		m++
	}
	args[at] = strconv.Itoa(m)
	return args, m
}

// dailyArgs returns the midnights around local for every daily limit, from
// the cache while local stays within the same day in every zone.
func (ks *keyState) dailyArgs(local time.Time) []any {
	if len(ks.zones) == 0 {
		return nil
	}
	us := local.UnixMicro()
	if d := ks.daily.Load(); d != nil && d.from <= us && us < d.to {
		return d.args
	}
	d := &dailyArgs{from: us, to: us, args: make([]any, 0, dailySpan*len(ks.zones))}
	first := true
	for _, loc := range ks.zones {
		lt := local.In(loc)
		y, m, day := lt.Date()
		for i := -2; i < dailySpan-2; i++ {
			d.args = append(d.args, strconv.FormatInt(time.Date(y, m, day+i, 0, 0, 0, 0, loc).UnixMicro(), 10))
		}
		from := time.Date(y, m, day, 0, 0, 0, 0, loc).UnixMicro()
		to := time.Date(y, m, day+1, 0, 0, 0, 0, loc).UnixMicro()
		if first || from > d.from {
			d.from = from
		}
		if first || to < d.to {
			d.to = to
		}
		first = false
	}
	ks.daily.Store(d)
	return d.args
}

// axisID is the axis's number as the script names it.
func axisID(a quota.Axis) string { return strconv.Itoa(int(a)) }

// micros formats d in whole microseconds, rounded up so a wait or pause is
// never shortened.
func micros(d time.Duration) string {
	us := d / time.Microsecond
	if us*time.Microsecond < d {
		us++
	}
	return strconv.FormatInt(int64(us), 10)
}
