package redis

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/tune"
	"github.com/tollgate/tollgate/quota/storekit"
)

// Kinds as the script numbers them.
const (
	kindBucket = "1"
	kindDaily  = "2"
	kindLeases = "3"
)

// dailySpan is how many window starts are passed per daily (or monthly)
// axis: from two days (months) before the caller's clock to three after, so
// the script finds the window containing Redis TIME even if the caller's
// clock is a day off.
const dailySpan = 6

// keyState is what a Store precomputes for one policy key: its Redis keys and
// the static part of the script's arguments, so a call allocates little. A
// tenant's budget nested in its account's (the root) is passed to the script
// with the root's.
type keyState struct {
	key    quota.Key
	policy quota.Policy
	// root is the key of the budget the tickets live in: the account's for
	// a tenant nested in it, else key itself; rootPolicy is its policy.
	root       quota.Key
	rootPolicy quota.Policy
	nested     bool
	// state, leases and queue are the root's hash, lease zset and zset of
	// queued tickets, by expiry; line its zset of tickets waiting in line,
	// by tag, finish its hash of tenants' latest tags and waiting its hash
	// of what each tenant has in line; ticket prefixes its ticket records.
	state   string
	leases  string
	queue   string
	line    string
	finish  string
	waiting string
	ticket  string
	// own holds, for a nested tenant, its own hash, lease zset and queue.
	own [3]string
	// static is the arguments from max wait to the last budget's limits
	// (see lua/common.lua).
	static []any
	// zones are the daily and monthly limits, in the order the script
	// reads their windows' starts.
	zones []quota.Limit
	// limited lists key's own axes in quota.Axes() order.
	limited []quota.Axis
	daily   atomic.Pointer[dailyArgs]
	// leaseTTL is the longest a ticket lives unrenewed: the shorter of
	// the budgets' LeaseTTLs; leaseTTLArg, in the scripts' µs.
	leaseTTL    time.Duration
	leaseTTLArg any
	// calibrates is false when the root's Calibration is Off; calib is
	// then ("0", "0", "0"), else its bounds and half-life in µs, as the
	// script's reserve, settle and snapshot read them.
	calibrates bool
	calib      [3]any
	// views are what this store last saw of the budgets' states, the
	// root's first (see views.go): passed back as they are, so that a
	// script finding a budget's state lost recovers it from what was
	// known, at no cost to a call. name is the store's name for an epoch
	// it begins.
	views []*view
	name  any
	// paced is set when a budget of the key has a bucket limit, whose
	// start gate spaces its calls (see Options.StartDelay).
	paced bool
}

// dailyArgs caches the midnights of every daily limit for one stretch of the
// caller's clock: [from, to) in unix µs.
type dailyArgs struct {
	from, to int64
	args     []any
}

// budgetKey is the Redis key of k's budget's state hash: the account's is
// prefix:{provider/account/model}, a tenant's that followed by
// "/<tenant>"; sep is what follows it in the budget's other keys (":" or
// "/"): a tenant's name has no "/", so no two budgets' keys can meet, and
// every key of an account and its tenants shares the account's hash tag.
// The provider's default account (Account "") is named "default"; an
// account named "default" is "/default", which no name can be.
func budgetKey(prefix string, k quota.Key) (key, sep string) {
	account := k.Account
	switch account {
	case "":
		account = "default"
	case "default":
		account = "/default"
	}
	tag := prefix + ":{" + k.Provider + "/" + account + "/" + k.Model + "}"
	if k.Tenant == "" {
		return tag, ":"
	}
	return tag + "/" + k.Tenant, "/"
}

// newKeyState precomputes k's arguments, with p its policy; for a tenant
// whose account has a policy (ap, nested), with the account's too. name is
// the store's name for the epochs it begins; viewOf returns the store's
// view of a budget, by its state hash, shared by every key charged to it.
func newKeyState(prefix string, k quota.Key, p quota.Policy, ap quota.Policy, nested bool, name string,
	viewOf func(state string, dailies int) *view) *keyState {
	root, rp := k, p
	if nested {
		root, rp = k.WithoutTenant(), ap
	}
	rk, sep := budgetKey(prefix, root)
	ks := &keyState{key: k, policy: p, root: root, rootPolicy: rp, nested: nested,
		state: rk, leases: rk + sep + "leases", queue: rk + sep + "queue", line: rk + sep + "line",
		finish: rk + sep + "finish", waiting: rk + sep + "waiting", ticket: rk + sep + "t" + sep}
	maxWait, leaseTTL, levels := rp.MaxWait, rp.LeaseTTL, "1"
	if nested {
		own, sep := budgetKey(prefix, k)
		ks.own = [3]string{own, own + sep + "leases", own + sep + "queue"}
		maxWait, leaseTTL, levels = min(maxWait, p.MaxWait), min(leaseTTL, p.LeaseTTL), "2"
	}
	ks.leaseTTL, ks.leaseTTLArg = leaseTTL, micros(leaseTTL)
	ks.static = []any{micros(maxWait), levels}
	ks.views = []*view{viewOf(rk, ks.budget(rp))}
	if nested {
		ks.limited = ks.limited[:0]
		ks.views = append(ks.views, viewOf(ks.own[0], ks.budget(p)))
	}
	ks.name = name
	ks.calib = [3]any{"0", "0", "0"}
	if c := rp.Calibration; !c.Off {
		ks.calibrates = true
		ks.calib = [3]any{strconv.FormatFloat(c.MinRatio, 'g', -1, 64), strconv.FormatFloat(c.MaxRatio, 'g', -1, 64), micros(c.HalfLife)}
	}
	return ks
}

// budget appends the static arguments of one budget's policy p: its
// priority reserve, whether it adopts, its lease TTL, the most its margin's
// burst grows to (storekit.MaxBurst), its limits; and its
// daily limits' zones and its axes to ks.zones and ks.limited. It returns
// how many daily limits p has.
func (ks *keyState) budget(p quota.Policy) (dailies int) {
	adopt := "0"
	if p.AdoptObservedLimits {
		adopt = "1"
	}
	ks.static = append(ks.static, strconv.FormatFloat(p.PriorityReserve, 'g', -1, 64), adopt, micros(p.LeaseTTL), fmtFloat(storekit.MaxBurst(p)), "")
	count := len(ks.static) - 1
	n := 0
	for _, a := range quota.Axes() {
		l, ok := p.Limit(a)
		if !ok {
			continue
		}
		n++
		ks.limited = append(ks.limited, a)
		kind, period, burst := kindBucket, micros(l.Period), fmtFloat(float64(l.BurstTime())/float64(l.Period))
		switch a.Kind() {
		case quota.DailyWindow, quota.MonthlyWindow:
			kind, period, burst = kindDaily, "0", "0"
			ks.zones = append(ks.zones, l)
			dailies++
		case quota.Leases:
			kind, period, burst = kindLeases, "0", "0"
		default:
			ks.paced = true
		}
		ks.static = append(ks.static, axisID(a), kind, strconv.FormatInt(p.Effective(l.Capacity), 10), period, burst)
	}
	ks.static[count] = strconv.Itoa(n)
	return dailies
}

// spend is the money the script is to charge for c: none where no budget
// of the key limits money, so that a fleet that meters no money writes
// unpriced records, the earlier release's form, whatever its price table;
// an error for a cost with no price on a money budget (see
// storekit.ValidateSpend).
func (ks *keyState) spend(c quota.Cost) (int64, error) {
	if err := storekit.ValidateSpend(c, ks.policies()...); err != nil {
		return 0, err
	}
	return ks.metered(c.Spend), nil
}

// metered is m where a budget of the key limits money, else 0.
func (ks *keyState) metered(m int64) int64 {
	if !storekit.MetersSpend(ks.policies()...) {
		return 0
	}
	return m
}

// policies are the key's own policy and, for a tenant nested in its
// account, the account's.
func (ks *keyState) policies() []quota.Policy {
	if ks.nested {
		return []quota.Policy{ks.policy, ks.rootPolicy}
	}
	return []quota.Policy{ks.policy}
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
	if ks.nested {
		return []string{ks.state, ks.leases, t, ks.queue, ks.line, ks.finish, ks.waiting, ks.own[0], ks.own[1], ks.own[2]}
	}
	return []string{ks.state, ks.leases, t, ks.queue, ks.line, ks.finish, ks.waiting}
}

// ttl is the script's argument for a grant asked to live ttl: µs, at most
// the policy's LeaseTTL (which 0 means), precomputed in that case.
func (ks *keyState) ttl(ttl time.Duration) any {
	if ttl <= 0 || ttl >= ks.leaseTTL {
		return ks.leaseTTLArg
	}
	return micros(ttl)
}

// args returns a script's ARGV for a call under tenant, weighing weight, at
// the caller's clock reading now, with room for extra op arguments (see
// lua/common.lua). weight is an interface so that the constants callers
// pass are boxed without allocating.
func (ks *keyState) args(now string, tenant string, weight any, local time.Time, extra int) []any {
	daily := ks.dailyArgs(local)
	args := make([]any, 0, 4+len(ks.static)+len(daily)+1+len(ks.views)+len(ks.zones)+extra)
	args = append(args, now, tenant, weight)
	args = append(args, ks.static...)
	args = append(args, daily...)
	args = append(args, ks.name)
	for _, v := range ks.views { // where decidedIn finds them
		args = append(args, v.epoch.Load())
	}
	for _, v := range ks.views {
		for i := range v.seen {
			args = append(args, v.seen[i].Load())
		}
	}
	return args
}

// decidedIn returns the epochs of ks's budgets, root first ("" for no
// second), that a call with ARGV args was decided in: each the one its reply
// names (epochs, as remember takes them), else the one the call passed. It
// is the grant's proof (see grants), which no other call's reply may
// change: the view's epoch may move on between the call and its reply.
func (ks *keyState) decidedIn(args []any, epochs []any) [2]any {
	passed := args[3+len(ks.static)+dailySpan*len(ks.zones)+1:]
	proofs := [2]any{"", ""}
	for i := range ks.views {
		proofs[i] = passed[i]
		if e, ok := epochs[i].(string); ok && e != "" {
			proofs[i] = e
		}
	}
	return proofs
}

// observations appends obs to args as the script's observe reads them (a
// count, then axis, adopted capacity or -1, remaining or -1 for each), and
// returns them with that count. Observations of axes policy does not
// limit, and of concurrency, are left out.
func observations(policy quota.Policy, args []any, obs []quota.Observation) ([]any, int) {
	at := len(args)
	args = append(args, "")
	m := 0
	for _, o := range obs {
		if _, ok := policy.Limit(o.Axis); !ok || o.Axis.Kind() == quota.Leases {
			continue
		}
		// A limit headroom leaves less than one unit of is not adopted: no
		// valid policy could give it.
		adopt := int64(-1)
		if policy.AdoptObservedLimits && o.Limit >= 1 {
			if eff := policy.Effective(min(o.Limit, tune.MaxCapacity)); eff >= 1 {
				adopt = eff
			}
		}
		args = append(args, axisID(o.Axis), adopt, o.Remaining)
		m++
	}
	args[at] = strconv.Itoa(m)
	return args, m
}

// dailyArgs returns the window starts around local for every daily (and
// monthly) limit, from the cache while local stays within the same windows.
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
	for _, l := range ks.zones {
		loc := l.Zone()
		y, m, day := local.In(loc).Date()
		monthly := l.Axis.Kind() == quota.MonthlyWindow
		for i := -2; i < dailySpan-2; i++ {
			at := time.Date(y, m, day+i, 0, 0, 0, 0, loc)
			if monthly {
				at = time.Date(y, m+time.Month(i), 1, 0, 0, 0, 0, loc)
			}
			d.args = append(d.args, strconv.FormatInt(at.UnixMicro(), 10))
		}
		start, end := l.Window(local)
		from, to := start.UnixMicro(), end.UnixMicro()
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
