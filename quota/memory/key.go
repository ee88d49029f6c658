package memory

import (
	"math"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// keyState is everything one bucket key holds. mu guards every field but key
// and policy, which never change.
type keyState struct {
	mu     sync.Mutex
	key    quota.Key
	policy quota.Policy

	buckets []bucket // in quota.Axes() order
	windows []window // in quota.Axes() order

	// concurrency is the effective number of leases, 0 without a limit.
	concurrency int64
	// leases are the slots of the tickets holding a lease.
	leases []int32

	pausedUntil time.Time
	pauseReason string

	// ratio is the key's learned estimate ratio (quota.Calibration).
	ratio quota.Ratio

	// last is the latest time the key was read at: its time never runs
	// backwards, as rate.Limiter would refill twice the span it was set back.
	last time.Time

	tickets tickets
}

func newKeyState(k quota.Key, p quota.Policy) *keyState {
	ks := &keyState{key: k, policy: p}
	for _, a := range quota.Axes() {
		l, ok := p.Limit(a)
		if !ok {
			continue
		}
		capacity := p.Effective(l.Capacity)
		switch a.Kind() {
		case quota.Bucket:
			ks.buckets = append(ks.buckets, newBucket(a, l.Period, capacity))
		case quota.DailyWindow:
			ks.windows = append(ks.windows, window{axis: a, zone: l.Zone(), capacity: capacity})
		case quota.Leases:
			ks.concurrency = capacity
		}
	}
	return ks
}

// lock takes ks.mu and returns the time to decide at: the clock read under
// the mutex, so callers are ordered as their times are, and never before a
// time the key was read at (a clock stepping back refills nothing twice).
func (ks *keyState) lock(clock quota.Clock) time.Time {
	ks.mu.Lock()
	now := clock.Now()
	if now.Before(ks.last) {
		return ks.last
	}
	ks.last = now
	return now
}

// reserved is the part of capacity closed to priority.
func (ks *keyState) reserved(priority quota.Priority, capacity int64) float64 {
	if priority == quota.Low {
		return ks.policy.Reserved(capacity)
	}
	return 0
}

// reserve decides r at now. ks.mu is held.
func (ks *keyState) reserve(now time.Time, r quota.Reservation) (quota.Decision, error) {
	if err := ks.oversize(r); err != nil {
		return quota.Decision{}, err
	}
	ks.sweep(now)
	if slot, ok := ks.tickets.find(r.Ticket); ok {
		if ks.tickets.slab[slot].expiry.After(now) {
			return ks.known(now, slot), nil
		}
		ks.forget(slot)
	}
	return ks.fresh(now, r), nil
}

// oversize returns an *quota.OversizeError when r's cost exceeds the whole
// capacity open to its priority on some axis.
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
	return nil
}

// fresh decides a ticket the key does not hold: refuse, or charge every axis
// and queue or grant it.
func (ks *keyState) fresh(now time.Time, r quota.Reservation) quota.Decision {
	if ks.pausedUntil.After(now) {
		return ks.paused(quota.Refused, now)
	}
	cost := ks.calibrated(now, r)
	for i := range ks.windows {
		w := &ks.windows[i]
		w.roll(now)
		if float64(w.used+cost.On(w.axis)) > float64(w.capacity)-ks.reserved(r.Priority, w.capacity) {
			return quota.Decision{Outcome: quota.Refused, Wait: w.end.Sub(now), Reason: quota.DailyLimit, Axis: w.axis}
		}
	}
	var wait time.Duration
	var axis quota.Axis
	for i := range ks.buckets {
		b := &ks.buckets[i]
		need := float64(cost.On(b.axis)) + ks.reserved(r.Priority, b.capacity)
		if w := b.waitFor(now, need); w > wait {
			wait, axis = w, b.axis
		}
	}
	if wait > ks.policy.MaxWait {
		return quota.Decision{Outcome: quota.Refused, Wait: wait, Reason: quota.Capacity, Axis: axis}
	}

	for i := range ks.buckets {
		ks.buckets[i].charge(now, cost.On(ks.buckets[i].axis))
	}
	for i := range ks.windows {
		ks.windows[i].add(cost.On(ks.windows[i].axis))
	}
	maturity := now.Add(wait)
	slot := ks.tickets.add(ticket{id: r.Ticket, charged: cost, chargedAt: now, state: queued, axis: axis,
		maturity: maturity, expiry: maturity.Add(ks.policy.LeaseTTL)})
	if wait > 0 {
		return quota.Decision{Outcome: quota.Queued, Wait: wait, Reason: quota.Capacity, Axis: axis, Charged: cost}
	}
	return ks.admit(now, slot)
}

// known answers a ticket the key holds, charging nothing.
func (ks *keyState) known(now time.Time, slot int32) quota.Decision {
	t := &ks.tickets.slab[slot]
	if t.state == granted {
		// The lease, if any, expires with the ticket, so it is still live.
		return ks.grant(t)
	}
	paused := ks.pausedUntil.After(now)
	if now.Before(t.maturity) {
		if paused && ks.pausedUntil.After(t.maturity) {
			return ks.paused(quota.Queued, now)
		}
		return quota.Decision{Outcome: quota.Queued, Wait: t.maturity.Sub(now), Reason: quota.Capacity, Axis: t.axis, Charged: t.charged}
	}
	if paused {
		return ks.paused(quota.Queued, now)
	}
	return ks.admit(now, slot)
}

// admit grants a matured ticket if a concurrency slot is free; otherwise the
// ticket stays queued, its charge kept, and is told when a slot may free up.
func (ks *keyState) admit(now time.Time, slot int32) quota.Decision {
	leased := ks.concurrency > 0
	if leased {
		ks.dropExpiredLeases(now)
		if int64(len(ks.leases)) >= ks.concurrency {
			wait := quota.DefaultLeaseRetry
			for _, l := range ks.leases {
				wait = min(wait, ks.tickets.slab[l].expiry.Sub(now))
			}
			return quota.Decision{Outcome: quota.Queued, Wait: max(wait, time.Millisecond),
				Reason: quota.ConcurrencyFull, Axis: quota.Concurrency, Charged: ks.tickets.slab[slot].charged}
		}
		ks.leases = append(ks.leases, slot)
	}
	ks.tickets.setExpiry(slot, now.Add(ks.policy.LeaseTTL))
	t := &ks.tickets.slab[slot]
	t.state = granted
	t.leased = leased
	return ks.grant(t)
}

func (ks *keyState) grant(t *ticket) quota.Decision {
	d := quota.Decision{Outcome: quota.Granted, Charged: t.charged}
	if t.leased {
		d.Lease, d.LeaseExpiry = true, t.expiry
	}
	return d
}

func (ks *keyState) paused(o quota.Outcome, now time.Time) quota.Decision {
	return quota.Decision{Outcome: o, Wait: ks.pausedUntil.Sub(now), Reason: quota.Paused, PauseReason: ks.pauseReason}
}

// calibrated is r's cost at the key's learned ratio, no axis charged more
// than the capacity open to r's priority: a call that fits as estimated is
// never turned into one that can never fit.
func (ks *keyState) calibrated(now time.Time, r quota.Reservation) quota.Cost {
	c := ks.policy.Calibration
	if c.Off || r.Prompt == 0 {
		return r.Cost
	}
	cost := quota.Calibrate(r.Cost, r.Prompt, ks.ratio.ValueAt(c, now))
	limit := func(axis quota.Axis, capacity int64) {
		open := int64(math.Floor(float64(capacity) - ks.reserved(r.Priority, capacity)))
		switch axis {
		case quota.InputTokens:
			cost.InputTokens = min(cost.InputTokens, max(open, r.Cost.InputTokens))
		case quota.Tokens, quota.TokensPerDay:
			cost.Tokens = min(cost.Tokens, max(open, r.Cost.Tokens))
		}
	}
	for i := range ks.buckets {
		limit(ks.buckets[i].axis, ks.buckets[i].capacity)
	}
	for i := range ks.windows {
		limit(ks.windows[i].axis, ks.windows[i].capacity)
	}
	return cost
}

// learn folds what the provider counted of a call's prompt into the key's
// ratio, when the settlement reports a count.
func (ks *keyState) learn(now time.Time, st quota.Settlement) {
	c := ks.policy.Calibration
	if c.Off || !st.Counted || st.Prompt <= 0 || st.Actual.InputTokens <= 0 {
		return
	}
	ks.ratio = ks.ratio.Learn(c, float64(st.Actual.InputTokens)/float64(st.Prompt), now)
}

// settle applies actual to the granted ticket and forgets it; false when the
// key holds no live grant under id.
func (ks *keyState) settle(now time.Time, id string, actual quota.Cost) bool {
	ks.sweep(now)
	slot, ok := ks.live(now, id)
	if !ok || ks.tickets.slab[slot].state != granted {
		return false
	}
	ks.correct(now, &ks.tickets.slab[slot], actual)
	ks.forget(slot)
	return true
}

// cancel refunds and forgets the ticket id, if the key holds it.
func (ks *keyState) cancel(now time.Time, id string) {
	ks.sweep(now)
	slot, ok := ks.live(now, id)
	if !ok {
		return
	}
	ks.correct(now, &ks.tickets.slab[slot], quota.Cost{})
	ks.forget(slot)
}

// correct charges every axis actual less what t was charged (refunding when
// negative). A daily window is corrected only if it is still the day t was
// charged in: a new day owes nothing for an estimate made the day before.
func (ks *keyState) correct(now time.Time, t *ticket, actual quota.Cost) {
	for i := range ks.buckets {
		b := &ks.buckets[i]
		b.charge(now, actual.On(b.axis)-t.charged.On(b.axis))
	}
	for i := range ks.windows {
		w := &ks.windows[i]
		w.roll(now)
		if w.holds(t.chargedAt) {
			w.add(actual.On(w.axis) - t.charged.On(w.axis))
		}
	}
}

// live finds the unexpired ticket id, forgetting it if it has expired.
func (ks *keyState) live(now time.Time, id string) (int32, bool) {
	slot, ok := ks.tickets.find(id)
	if !ok {
		return 0, false
	}
	if !ks.tickets.slab[slot].expiry.After(now) {
		ks.forget(slot)
		return 0, false
	}
	return slot, true
}

// forget drops a ticket and its lease.
func (ks *keyState) forget(slot int32) {
	if ks.tickets.slab[slot].leased {
		for i, l := range ks.leases {
			if l == slot {
				ks.leases[i] = ks.leases[len(ks.leases)-1]
				ks.leases = ks.leases[:len(ks.leases)-1]
				break
			}
		}
	}
	ks.tickets.remove(slot)
}

// sweep forgets up to sweepBudget expired tickets.
func (ks *keyState) sweep(now time.Time) {
	for range sweepBudget {
		slot, ok := ks.tickets.oldest()
		if !ok || ks.tickets.slab[slot].expiry.After(now) {
			return
		}
		ks.forget(slot)
	}
}

// dropExpiredLeases forgets every leased ticket whose lease has expired.
func (ks *keyState) dropExpiredLeases(now time.Time) {
	for i := len(ks.leases) - 1; i >= 0; i-- {
		if i < len(ks.leases) && !ks.tickets.slab[ks.leases[i]].expiry.After(now) {
			ks.forget(ks.leases[i])
		}
	}
}

// pause extends the key's pause to until.
func (ks *keyState) pause(now, until time.Time, reason string) {
	if !until.After(now) || !until.After(ks.pausedUntil) {
		return
	}
	ks.pausedUntil, ks.pauseReason = until, reason
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
		case quota.DailyWindow:
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

// snapshot reports the key's levels at now.
func (ks *keyState) snapshot(now time.Time) quota.Snapshot {
	s := quota.Snapshot{Key: ks.key, At: now}
	for _, a := range quota.Axes() {
		switch a.Kind() {
		case quota.Bucket:
			for i := range ks.buckets {
				if b := &ks.buckets[i]; b.axis == a {
					s.Axes = append(s.Axes, quota.AxisLevel{Axis: a, Capacity: b.capacity, Available: b.level(now)})
				}
			}
		case quota.DailyWindow:
			for i := range ks.windows {
				if w := &ks.windows[i]; w.axis == a {
					w.roll(now)
					s.Axes = append(s.Axes, quota.AxisLevel{Axis: a, Capacity: w.capacity,
						Available: float64(w.capacity - w.used), ResetAt: w.end})
				}
			}
		case quota.Leases:
			if ks.concurrency > 0 {
				ks.dropExpiredLeases(now)
				s.Axes = append(s.Axes, quota.AxisLevel{Axis: a, Capacity: ks.concurrency,
					Available: float64(ks.concurrency - int64(len(ks.leases)))})
			}
		}
	}
	if ks.pausedUntil.After(now) {
		s.PausedUntil, s.PauseReason = ks.pausedUntil, ks.pauseReason
	}
	s.EstimateRatio = 1
	if !ks.policy.Calibration.Off {
		s.EstimateRatio = ks.ratio.ValueAt(ks.policy.Calibration, now)
	}
	return s
}
