package memory

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// tree is an account's budget and the budgets of the tenants nested in it
// (or a tenant's budget on its own, when its account has none): one mutex,
// one clock reading and one table of tickets for all of them, so a call
// charged to two budgets is decided, charged and settled in one step. mu
// guards every field but root, and every field of the tree's keyStates.
type tree struct {
	mu   sync.Mutex
	root *keyState

	// last is the latest time the tree was read at: its time never runs
	// backwards, or a level would refill twice the span it was set back.
	last time.Time

	tickets tickets
	line    line
}

// scope is what one call is charged to: the tree's root budget and, for a
// tenant with a budget nested in its account's, that budget too (own).
type scope struct {
	own    *keyState // nil: the call is charged to root alone
	root   *keyState
	tenant string // the call's Key.Tenant
}

// validateSpend refuses a cost with no price on a money budget (see
// storekit.ValidateSpend).
func (sc scope) validateSpend(c quota.Cost) error {
	if sc.own != nil {
		return storekit.ValidateSpend(c, sc.own.policy, sc.root.policy)
	}
	return storekit.ValidateSpend(c, sc.root.policy)
}

// levels returns the scope's budgets, own first; own may be nil.
func (sc scope) levels() [2]*keyState { return [2]*keyState{sc.own, sc.root} }

// target is the budget the call's key names (quota.Policies.Lookup): the
// one Pause, Observe and Snapshot act on.
func (sc scope) target() *keyState {
	if sc.own != nil {
		return sc.own
	}
	return sc.root
}

// maxWait is the longest a ticket of the scope may wait: the shortest
// MaxWait of its budgets.
func (sc scope) maxWait() time.Duration {
	if sc.own != nil {
		return min(sc.own.policy.MaxWait, sc.root.policy.MaxWait)
	}
	return sc.root.policy.MaxWait
}

// leaseTTL is the longest a ticket of the scope lives unrenewed: the
// shortest LeaseTTL of its budgets.
func (sc scope) leaseTTL() time.Duration {
	if sc.own != nil {
		return min(sc.own.policy.LeaseTTL, sc.root.policy.LeaseTTL)
	}
	return sc.root.policy.LeaseTTL
}

// leaseTTLFor is storekit.LeaseTTL over the scope's budgets.
func (sc scope) leaseTTLFor(ttl time.Duration) time.Duration {
	return storekit.LeaseTTL(sc.leaseTTL(), ttl)
}

// pause returns the latest pause in force on the scope's budgets at now,
// and the budget holding it (own first among equals), or nil.
func (sc scope) pause(now time.Time) *keyState {
	var p *keyState
	for _, ks := range sc.levels() {
		if ks != nil && ks.paused(now) && (p == nil || ks.pausedUntil.After(p.pausedUntil)) {
			p = ks
		}
	}
	return p
}

// lock takes tr.mu and returns the time to decide at: the clock read under
// the mutex, so callers are ordered as their times are, and never before a
// time the tree was read at (a clock stepping back refills nothing twice).
func (tr *tree) lock(clock quota.Clock) time.Time {
	tr.mu.Lock()
	now := clock.Now()
	if now.Before(tr.last) {
		return tr.last
	}
	tr.last = now
	return now
}

// reserve decides r at now for the scope sc, r's tenant weighing weight.
// tr.mu is held.
func (tr *tree) reserve(now time.Time, sc scope, r quota.Reservation, weight float64) (quota.Decision, error) {
	for _, ks := range sc.levels() {
		if ks == nil {
			continue
		}
		if err := ks.oversize(r); err != nil {
			return quota.Decision{}, err
		}
	}
	tr.sweep(now)
	slot, ok, err := tr.held(now, sc, r.Key, r.Ticket)
	if err != nil {
		return quota.Decision{}, err
	}
	if ok {
		return tr.known(now, sc, slot, r), nil
	}
	return tr.fresh(now, sc, r, weight), nil
}

// held finds the live ticket id, which must be sc's tenant's.
func (tr *tree) held(now time.Time, sc scope, k quota.Key, id string) (int32, bool, error) {
	slot, ok := tr.live(now, id)
	if ok && tr.tickets.slab[slot].tenant != sc.tenant {
		return 0, false, storekit.WrongTenantError(k, id, tr.tickets.slab[slot].tenant)
	}
	return slot, ok, nil
}

// fresh decides a ticket the tree does not hold: refuse, or charge every
// axis of every budget and queue it (in fair-share order, see line.go) or
// grant it.
func (tr *tree) fresh(now time.Time, sc scope, r quota.Reservation, weight float64) quota.Decision {
	if p := sc.pause(now); p != nil {
		return paused(p, quota.Refused, now)
	}
	cost := tr.calibrated(now, sc, r)
	// A spent window refuses until it resets: the latest reset among the
	// budgets, each naming its first spent window.
	var refusal time.Duration
	var spent quota.Axis
	var budget quota.Key
	for _, ks := range sc.levels() {
		if ks == nil {
			continue
		}
		if w, axis, ok := ks.spentWindow(now, cost, r.Priority); ok && (spent == 0 || w > refusal) {
			refusal, spent, budget = w, axis, ks.key
		}
	}
	if spent != 0 {
		return spentDecision(refusal, spent, budget)
	}
	tag := tr.tag(sc.tenant, cost, weight)
	wait, axis := tr.wait(now, sc, tr.sums(tag, tr.line.seq+1, sc.tenant), cost, r.Priority)
	if wait > sc.maxWait() {
		return quota.Decision{Outcome: quota.Refused, Wait: wait, Reason: quota.Capacity, Axis: axis}
	}

	for _, ks := range sc.levels() {
		if ks != nil {
			ks.charge(now, cost)
		}
	}
	maturity := now.Add(wait)
	slot := tr.tickets.add(ticket{id: r.Ticket, tenant: sc.tenant, own: sc.own, charged: cost, chargedAt: now,
		state: queued, axis: axis, maturity: maturity, expiry: maturity.Add(tr.life(sc, r))})
	if wait > 0 {
		tr.enter(slot, tag)
		return quota.Decision{Outcome: quota.Queued, Wait: wait, Reason: quota.Capacity, Axis: axis, Charged: cost}
	}
	tr.pass(sc.tenant, tag)
	if r.Place {
		return ready(cost)
	}
	return tr.admit(now, sc, slot, r)
}

// life is how long a ticket r queues waits for its caller once mature: a
// place, r.LeaseTTL; other tickets, the policy's LeaseTTL.
func (tr *tree) life(sc scope, r quota.Reservation) time.Duration {
	if r.Place {
		return sc.leaseTTLFor(r.LeaseTTL)
	}
	return sc.leaseTTL()
}

// calibrated is r's cost at the root's learned ratio (a provider counts per
// account), no axis charged more than the capacity open to r's priority in
// any of the scope's budgets: a call that fits as estimated is never turned
// into one that can never fit.
func (tr *tree) calibrated(now time.Time, sc scope, r quota.Reservation) quota.Cost {
	c := sc.root.policy.Calibration
	if c.Off || r.Prompt == 0 {
		return r.Cost
	}
	cost := quota.Calibrate(r.Cost, r.Prompt, sc.root.ratio.ValueAt(c, now))
	for _, ks := range sc.levels() {
		if ks != nil {
			ks.limit(&cost, r.Cost, r.Priority)
		}
	}
	return cost
}

// ready answers a place that has matured: its call may come for it.
func ready(charged quota.Cost) quota.Decision {
	return quota.Decision{Outcome: quota.Queued, Charged: charged}
}

// paused answers o for a call stopped by the pause of ks.
func paused(ks *keyState, o quota.Outcome, now time.Time) quota.Decision {
	return quota.Decision{Outcome: o, Wait: ks.pausedUntil.Sub(now), Reason: quota.Paused, PauseReason: ks.pauseReason}
}

// known answers a ticket the tree holds, charging nothing.
func (tr *tree) known(now time.Time, sc scope, slot int32, r quota.Reservation) quota.Decision {
	t := &tr.tickets.slab[slot]
	p := sc.pause(now)
	if t.state == granted {
		if p != nil {
			// Granted before the pause and never settled: the call has not
			// run (or its attempt is over), so it waits the pause out in
			// line, holding no lease.
			tr.requeue(sc, slot, p.pausedUntil)
			return paused(p, quota.Queued, now)
		}
		// The lease, if any, expires with the ticket, so it is still
		// live; the caller is about to run on it, so it is renewed. A
		// grant come back after its start (a retry dispatched late, or an
		// attempt that crashed) gave that start to nobody: it gives it
		// back and takes one anew, so it cannot start together with the
		// call after it.
		if t := &tr.tickets.slab[slot]; t.start.Before(now) {
			sc.root.unstart(now, t.charged, t.start)
			t.start = now.Add(sc.root.start(now, t.charged))
		}
		tr.renew(now, sc, slot, r.LeaseTTL)
		return grant(now, &tr.tickets.slab[slot])
	}
	// A ticket in line matures when its place does (see line.go), and
	// never before the maturity it was first told.
	maturity, axis := t.maturity, t.axis
	if t.inLine {
		wait, a := tr.wait(now, sc, tr.sums(t.tag, t.seq, t.tenant), t.charged, r.Priority)
		if at := now.Add(wait); at.After(maturity) {
			maturity, axis = at, a
			// Its place lapses as long after its new maturity as after
			// its first.
			if expiry := at.Add(tr.life(sc, r)); expiry.After(t.expiry) {
				tr.tickets.setExpiry(slot, expiry)
			}
		}
	}
	if now.Before(maturity) {
		if p != nil && p.pausedUntil.After(maturity) {
			return paused(p, quota.Queued, now)
		}
		return quota.Decision{Outcome: quota.Queued, Wait: maturity.Sub(now), Reason: quota.Capacity, Axis: axis, Charged: t.charged}
	}
	if p != nil {
		return paused(p, quota.Queued, now)
	}
	tr.serve(slot)
	if r.Place {
		return ready(t.charged)
	}
	return tr.admit(now, sc, slot, r)
}

// admit grants a matured ticket if every budget of the scope with a
// concurrency limit has a slot open to r's priority; otherwise the ticket
// stays queued, its charge kept, and is told when slots may free up: the
// latest of the budgets' earliest lease expiries, at most
// quota.DefaultLeaseRetry.
func (tr *tree) admit(now time.Time, sc scope, slot int32, r quota.Reservation) quota.Decision {
	full := false
	var wait time.Duration
	for _, ks := range sc.levels() {
		if ks == nil || ks.concurrency == 0 {
			continue
		}
		tr.dropExpiredLeases(ks, now)
		open := float64(ks.concurrency) - ks.reserved(r.Priority, ks.concurrency)
		if float64(len(ks.leases)+1) <= open {
			continue
		}
		w := quota.DefaultLeaseRetry
		for _, l := range ks.leases {
			w = min(w, tr.tickets.slab[l].expiry.Sub(now))
		}
		if !full || w > wait {
			wait = w
		}
		full = true
	}
	if full {
		// Waiting for a slot, the ticket lives the policy's LeaseTTL from
		// its caller's latest visit (a claimed place included).
		if keep := now.Add(sc.leaseTTL()); keep.After(tr.tickets.slab[slot].expiry) {
			tr.tickets.setExpiry(slot, keep)
		}
		return quota.Decision{Outcome: quota.Queued, Wait: max(wait, time.Millisecond),
			Reason: quota.ConcurrencyFull, Axis: quota.Concurrency, Charged: tr.tickets.slab[slot].charged}
	}
	if d, ok := tr.today(now, sc, slot, r.Priority); !ok {
		return d
	}
	leased := false
	for _, ks := range sc.levels() {
		if ks != nil && ks.concurrency > 0 {
			ks.leases = append(ks.leases, slot)
			leased = true
		}
	}
	t := &tr.tickets.slab[slot]
	t.state = granted
	t.leased = leased
	t.start = now.Add(sc.root.start(now, t.charged))
	// The grant lives its TTL from its start: a call paced to start later
	// holds it while it waits.
	tr.tickets.setExpiry(slot, t.start.Add(sc.leaseTTLFor(r.LeaseTTL)))
	return grant(now, t)
}

// today moves the daily charges of the queued ticket in slot, taken on a
// day before now's, into now's day, where its call runs. When a budget's
// day has no room for it, the ticket is refunded and forgotten, and the
// call refused as a new one would be.
func (tr *tree) today(now time.Time, sc scope, slot int32, priority quota.Priority) (quota.Decision, bool) {
	t := &tr.tickets.slab[slot]
	for _, ks := range sc.levels() {
		if ks == nil {
			continue
		}
		if wait, axis, spent := ks.lateSpent(now, t.charged, t.chargedAt, priority); spent {
			tr.correct(now, t, quota.Cost{})
			tr.forget(slot)
			return spentDecision(wait, axis, ks.key), false
		}
	}
	for _, ks := range sc.levels() {
		if ks != nil {
			ks.moveToToday(now, t.charged, t.chargedAt)
		}
	}
	t.chargedAt = now
	return quota.Decision{}, true
}

func grant(now time.Time, t *ticket) quota.Decision {
	d := quota.Decision{Outcome: quota.Granted, Charged: t.charged, GrantLeft: t.expiry.Sub(now), Start: max(t.start.Sub(now), 0)}
	if t.leased {
		d.Lease, d.LeaseExpiry = true, t.expiry
	}
	return d
}

// renew makes the granted ticket in slot, and so its leases, live ttl (as
// scope.leaseTTLFor reads it) from now, unless it already lives longer.
func (tr *tree) renew(now time.Time, sc scope, slot int32, ttl time.Duration) {
	if expiry := now.Add(sc.leaseTTLFor(ttl)); expiry.After(tr.tickets.slab[slot].expiry) {
		tr.tickets.setExpiry(slot, expiry)
	}
}

// requeue puts the granted ticket in slot back in line, maturing at
// maturity: its leases are released and its charge kept.
func (tr *tree) requeue(sc scope, slot int32, maturity time.Time) {
	tr.release(slot)
	t := &tr.tickets.slab[slot]
	t.state, t.maturity, t.axis = queued, maturity, 0
	tr.tickets.setExpiry(slot, maturity.Add(sc.leaseTTL()))
}

// settle applies st.Actual to the granted ticket and forgets it; false when
// the tree holds no live grant under st.Ticket. A ticket the tree no longer
// holds at all is charged what st.Actual exceeds st.Charged by, on every
// axis of every budget of the scope: its estimate is still charged, and
// the call may have run.
func (tr *tree) settle(now time.Time, sc scope, st quota.Settlement) (bool, error) {
	tr.sweep(now)
	slot, ok, err := tr.held(now, sc, st.Key, st.Ticket)
	if err != nil {
		return false, err
	}
	if !ok {
		for _, ks := range sc.levels() {
			if ks != nil {
				ks.overrun(now, st.Actual, st.Charged)
			}
		}
		return false, nil
	}
	t := &tr.tickets.slab[slot]
	if t.state != granted {
		return false, nil
	}
	tr.correct(now, t, st.Actual)
	// The gates are corrected too: a provider counts what a call used.
	tr.root.restart(now, t.charged, st.Actual)
	tr.forget(slot)
	return true, nil
}

// renewal renews the grant id for ttl and returns how long it now has left;
// false when the tree holds no live grant under id.
func (tr *tree) renewal(now time.Time, sc scope, k quota.Key, id string, ttl time.Duration) (time.Duration, bool, error) {
	tr.sweep(now)
	slot, ok, err := tr.held(now, sc, k, id)
	if err != nil || !ok || tr.tickets.slab[slot].state != granted {
		return 0, false, err
	}
	tr.renew(now, sc, slot, ttl)
	return tr.tickets.slab[slot].expiry.Sub(now), true, nil
}

// cancel refunds and forgets the ticket id, if the tree holds it.
func (tr *tree) cancel(now time.Time, sc scope, k quota.Key, id string) error {
	tr.sweep(now)
	slot, ok, err := tr.held(now, sc, k, id)
	if err != nil || !ok {
		return err
	}
	t := &tr.tickets.slab[slot]
	if t.state == granted {
		tr.root.unstart(now, t.charged, t.start) // a call given up never reached the provider
	}
	tr.correct(now, t, quota.Cost{})
	tr.forget(slot)
	return nil
}

// correct charges every budget t was charged to actual less its charge.
func (tr *tree) correct(now time.Time, t *ticket, actual quota.Cost) {
	if t.own != nil {
		t.own.correct(now, t.charged, t.chargedAt, actual)
	}
	tr.root.correct(now, t.charged, t.chargedAt, actual)
}

// live finds the unexpired ticket id, letting it lapse if it has expired.
func (tr *tree) live(now time.Time, id string) (int32, bool) {
	slot, ok := tr.tickets.find(id)
	if !ok {
		return 0, false
	}
	if !tr.tickets.slab[slot].expiry.After(now) {
		tr.lapse(now, slot)
		return 0, false
	}
	return slot, true
}

// lapse forgets an expired ticket. One that was never granted never ran:
// its charge is refunded (daily windows as Cancel refunds them). A grant
// keeps its charge, since its call may have run.
func (tr *tree) lapse(now time.Time, slot int32) {
	if t := &tr.tickets.slab[slot]; t.state == queued {
		tr.correct(now, t, quota.Cost{})
	}
	tr.forget(slot)
}

// forget drops a ticket, its place in line and its leases.
func (tr *tree) forget(slot int32) {
	tr.unline(slot)
	tr.release(slot)
	tr.tickets.remove(slot)
}

// release drops the ticket's leases, if it holds any.
func (tr *tree) release(slot int32) {
	t := &tr.tickets.slab[slot]
	if !t.leased {
		return
	}
	if t.own != nil {
		t.own.release(slot)
	}
	tr.root.release(slot)
	t.leased = false
}

// sweep lets up to sweepBudget expired tickets lapse.
func (tr *tree) sweep(now time.Time) {
	for range sweepBudget {
		slot, ok := tr.tickets.oldest()
		if !ok || tr.tickets.slab[slot].expiry.After(now) {
			return
		}
		tr.lapse(now, slot)
	}
}

// dropExpiredLeases forgets every ticket leased on ks whose lease has
// expired.
func (tr *tree) dropExpiredLeases(ks *keyState, now time.Time) {
	for i := len(ks.leases) - 1; i >= 0; i-- {
		if i < len(ks.leases) && !tr.tickets.slab[ks.leases[i]].expiry.After(now) {
			tr.forget(ks.leases[i])
		}
	}
}

// spentDecision refuses a call whose window on axis of budget is spent
// until it resets, in wait: a money budget is BudgetSpent, a daily limit
// DailyLimit.
func spentDecision(wait time.Duration, axis quota.Axis, budget quota.Key) quota.Decision {
	reason := quota.DailyLimit
	if axis.Spend() {
		reason = quota.BudgetSpent
	}
	return quota.Decision{Outcome: quota.Refused, Wait: wait, Reason: reason, Axis: axis, Budget: budget}
}
