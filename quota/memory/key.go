package memory

import (
	"math"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// keyState is one budget: the levels of a key with a policy. Its fields are
// guarded by its tree's mutex; key, policy and tree never change.
type keyState struct {
	key    quota.Key
	policy quota.Policy
	// tree holds the tickets charged to this budget: its own, or its
	// account's for a tenant nested in one.
	tree *tree

	buckets []bucket // in quota.Axes() order
	windows []window // in quota.Axes() order

	// concurrency is the effective number of leases, 0 without a limit.
	concurrency int64
	// leases are the slots (in tree.tickets) of the tickets holding a
	// lease on this budget.
	leases []int32

	pausedUntil time.Time
	pauseReason quota.PauseReason

	// ratio is the budget's learned estimate ratio (quota.Calibration),
	// learned and applied at a tree's root only.
	ratio storekit.Ratio
	// maxBurst is the most its buckets' margins' burst grows to
	// (storekit.MaxBurst).
	maxBurst float64
}

func newKeyState(k quota.Key, p quota.Policy) *keyState {
	ks := &keyState{key: k, policy: p, maxBurst: storekit.MaxBurst(p)}
	for _, a := range quota.Axes() {
		l, ok := p.Limit(a)
		if !ok {
			continue
		}
		capacity := p.Effective(l.Capacity)
		switch a.Kind() {
		case quota.Bucket:
			ks.buckets = append(ks.buckets, newBucket(l, capacity))
		case quota.DailyWindow, quota.MonthlyWindow:
			ks.windows = append(ks.windows, window{axis: a, limit: l, capacity: capacity})
		case quota.Leases:
			ks.concurrency = capacity
		}
	}
	return ks
}

// reserved is the part of capacity closed to priority.
func (ks *keyState) reserved(priority quota.Priority, capacity int64) float64 {
	if priority == quota.Low {
		return float64(capacity) * ks.policy.PriorityReserve
	}
	return 0
}

// oversize returns an *quota.OversizeError when r's cost exceeds the whole
// capacity of this budget open to its priority on some axis.
func (ks *keyState) oversize(r quota.Reservation) error {
	check := func(axis quota.Axis, capacity int64) error {
		cost := r.Cost.On(axis)
		if open := float64(capacity) - ks.reserved(r.Priority, capacity); float64(cost) > open {
			return &quota.OversizeError{Key: ks.key, Axis: axis, Cost: cost,
				Capacity: int64(math.Floor(open)), Priority: r.Priority}
		}
		return nil
	}
	for i := range ks.buckets {
		if err := check(ks.buckets[i].axis, ks.buckets[i].capacity); err != nil {
			return err
		}
	}
	for i := range ks.windows {
		if err := check(ks.windows[i].axis, ks.windows[i].capacity); err != nil {
			return err
		}
	}
	// A call takes one concurrency slot: Low needs one below the reserve.
	if ks.concurrency > 0 {
		if open := float64(ks.concurrency) - ks.reserved(r.Priority, ks.concurrency); open < 1 {
			return &quota.OversizeError{Key: ks.key, Axis: quota.Concurrency, Cost: 1,
				Capacity: int64(math.Floor(open)), Priority: r.Priority}
		}
	}
	return nil
}

// limit lowers cost's calibrated parts to the whole units of this budget
// open to priority, never below raw, the cost as estimated.
func (ks *keyState) limit(cost *quota.Cost, raw quota.Cost, priority quota.Priority) {
	bound := func(axis quota.Axis, capacity int64) {
		open := int64(math.Floor(float64(capacity) - ks.reserved(priority, capacity)))
		switch axis {
		case quota.InputTokens:
			cost.InputTokens = min(cost.InputTokens, max(open, raw.InputTokens))
		case quota.Tokens, quota.TokensPerDay:
			cost.Tokens = min(cost.Tokens, max(open, raw.Tokens))
		}
	}
	for i := range ks.buckets {
		bound(ks.buckets[i].axis, ks.buckets[i].capacity)
	}
	for i := range ks.windows {
		bound(ks.windows[i].axis, ks.windows[i].capacity)
	}
}

// spentWindow returns the first daily window cost does not fit (for
// priority) and the wait until it resets.
func (ks *keyState) spentWindow(now time.Time, cost quota.Cost, priority quota.Priority) (time.Duration, quota.Axis, bool) {
	for i := range ks.windows {
		w := &ks.windows[i]
		w.roll(now)
		if float64(w.used+cost.On(w.axis)) > float64(w.capacity)-ks.reserved(priority, w.capacity) {
			return w.end.Sub(now), w.axis, true
		}
	}
	return 0, 0, false
}

// lateSpent returns, for a charge taken on a day before now's (chargedAt),
// the first daily window whose day now has no room for it (for priority),
// and the wait until it resets.
func (ks *keyState) lateSpent(now time.Time, charged quota.Cost, chargedAt time.Time, priority quota.Priority) (time.Duration, quota.Axis, bool) {
	for i := range ks.windows {
		w := &ks.windows[i]
		w.roll(now)
		c := charged.On(w.axis)
		if c > 0 && !w.holds(chargedAt) && float64(w.used+c) > float64(w.capacity)-ks.reserved(priority, w.capacity) {
			return w.end.Sub(now), w.axis, true
		}
	}
	return 0, 0, false
}

// moveToToday charges now's day the daily part of a charge taken on a day
// before it (chargedAt): the day a call is granted in owes its estimate.
func (ks *keyState) moveToToday(now time.Time, charged quota.Cost, chargedAt time.Time) {
	for i := range ks.windows {
		w := &ks.windows[i]
		w.roll(now)
		if !w.holds(chargedAt) {
			w.add(charged.On(w.axis))
		}
	}
}

// charge takes cost from every bucket and window.
func (ks *keyState) charge(now time.Time, cost quota.Cost) {
	for i := range ks.buckets {
		ks.buckets[i].charge(now, cost.On(ks.buckets[i].axis))
	}
	for i := range ks.windows {
		ks.windows[i].add(cost.On(ks.windows[i].axis))
	}
}

// correct charges every axis actual less charged (refunding when
// negative). A daily window is corrected only if it is still the day the
// charge was taken in (chargedAt): a new day owes nothing for an estimate
// made the day before.
func (ks *keyState) correct(now time.Time, charged quota.Cost, chargedAt time.Time, actual quota.Cost) {
	for i := range ks.buckets {
		b := &ks.buckets[i]
		b.charge(now, actual.On(b.axis)-charged.On(b.axis))
	}
	for i := range ks.windows {
		w := &ks.windows[i]
		w.roll(now)
		if w.holds(chargedAt) {
			w.add(actual.On(w.axis) - charged.On(w.axis))
		}
	}
}

// overrun charges every axis what actual exceeds charged by, refunding
// nothing; daily windows are charged in the current day.
func (ks *keyState) overrun(now time.Time, actual, charged quota.Cost) {
	for i := range ks.buckets {
		b := &ks.buckets[i]
		if n := actual.On(b.axis) - charged.On(b.axis); n > 0 {
			b.charge(now, n)
		}
	}
	for i := range ks.windows {
		w := &ks.windows[i]
		if n := actual.On(w.axis) - charged.On(w.axis); n > 0 {
			w.roll(now)
			w.add(n)
		}
	}
}

// paused reports whether the budget is paused at now.
func (ks *keyState) paused(now time.Time) bool { return ks.pausedUntil.After(now) }

// pause extends the budget's pause to d from now.
func (ks *keyState) pause(now time.Time, d time.Duration, reason quota.PauseReason) {
	until := now.Add(d)
	if d <= 0 || !until.After(ks.pausedUntil) {
		return
	}
	ks.pausedUntil, ks.pauseReason = until, reason
}

// release drops slot's lease on this budget, if it holds one.
func (ks *keyState) release(slot int32) {
	for i, l := range ks.leases {
		if l == slot {
			ks.leases[i] = ks.leases[len(ks.leases)-1]
			ks.leases = ks.leases[:len(ks.leases)-1]
			return
		}
	}
}

// learn folds what the provider counted of a call's prompt into the
// budget's ratio, when the settlement reports a count.
func (ks *keyState) learn(now time.Time, st quota.Settlement) {
	c := ks.policy.Calibration
	if c.Off || !st.Counted || st.Prompt <= 0 || st.Actual.InputTokens <= 0 {
		return
	}
	ks.ratio = ks.ratio.Learn(c, float64(st.Actual.InputTokens)/float64(st.Prompt), now)
}

// estimateRatio is the budget's learned ratio at now, 1 with calibration
// off.
func (ks *keyState) estimateRatio(now time.Time) float64 {
	if ks.policy.Calibration.Off {
		return 1
	}
	return ks.ratio.ValueAt(ks.policy.Calibration, now)
}

// observe applies what a provider reported.
func (ks *keyState) observe(now time.Time, obs []quota.Observation) {
	for _, o := range obs {
		switch o.Axis.Kind() {
		case quota.Bucket:
			for i := range ks.buckets {
				b := &ks.buckets[i]
				if b.axis != o.Axis {
					continue
				}
				if eff, ok := adoptable(ks.policy, o.Limit); ok {
					b.resize(now, eff)
				}
				if o.Remaining >= 0 {
					b.lower(now, o.Remaining)
				}
			}
		case quota.DailyWindow, quota.MonthlyWindow:
			for i := range ks.windows {
				w := &ks.windows[i]
				if w.axis != o.Axis {
					continue
				}
				w.roll(now)
				if eff, ok := adoptable(ks.policy, o.Limit); ok {
					w.capacity = eff
				}
				if o.Remaining >= 0 {
					w.used = max(w.used, w.capacity-o.Remaining)
				}
			}
		}
	}
}

// snapshot reports the budget's levels at now. The tree has swept its
// expired tickets.
func (ks *keyState) snapshot(now time.Time) quota.Snapshot {
	s := quota.Snapshot{Key: ks.key, At: now}
	for _, a := range quota.Axes() {
		switch a.Kind() {
		case quota.Bucket:
			for i := range ks.buckets {
				if b := &ks.buckets[i]; b.axis == a {
					s.Axes = append(s.Axes, quota.AxisLevel{Axis: a, Capacity: b.capacity, Burst: b.burst, Available: b.level(now)})
				}
			}
		case quota.DailyWindow, quota.MonthlyWindow:
			for i := range ks.windows {
				if w := &ks.windows[i]; w.axis == a {
					w.roll(now)
					s.Axes = append(s.Axes, quota.AxisLevel{Axis: a, Capacity: w.capacity,
						Available: float64(w.capacity - w.used), ResetAt: w.end})
				}
			}
		case quota.Leases:
			if ks.concurrency > 0 {
				ks.tree.dropExpiredLeases(ks, now)
				s.Axes = append(s.Axes, quota.AxisLevel{Axis: a, Capacity: ks.concurrency,
					Available: float64(ks.concurrency - int64(len(ks.leases)))})
			}
		}
	}
	if ks.paused(now) {
		s.PausedUntil, s.PauseReason = ks.pausedUntil, ks.pauseReason
	}
	return s
}
