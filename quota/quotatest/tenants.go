package quotatest

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// setupTenants builds a store holding an account's policy (nil: none) and
// its tenants' own, under keys named name; the env's key is the account's.
func (s suite) setupTenants(t *testing.T, name string, account *quota.Policy, tenants map[string]quota.Policy) *env {
	t.Helper()
	k := s.key(name)
	policies := map[quota.Key]quota.Policy{}
	if account != nil {
		policies[k] = *account
	}
	for tenant, p := range tenants {
		policies[tenantOf(k, tenant)] = p
	}
	return s.setupKeys(t, k, policies, start())
}

func tenantOf(k quota.Key, tenant string) quota.Key {
	k.Tenant = tenant
	return k
}

// tenant returns the env's key for tenant ("" for the account's).
func (e *env) tenant(name string) quota.Key { return tenantOf(e.key, name) }

// on returns a view of e acting on tenant's key ("" for the account's).
func (e *env) on(tenant string) *env {
	f := *e
	f.key = e.tenant(tenant)
	return &f
}

// testNestedBudgets: a tenant's call must fit its own budget and its
// account's: a burst never gets more than the account allows, nor a
// tenant more than its own; the wait is the longer of the two; daily
// windows and MaxWait refuse from either; untenanted calls and tenants
// without a policy are charged to the account alone.
func testNestedBudgets(t *testing.T, s suite) {
	e := s.setupTenants(t, "nested", &quota.Policy{
		Limits:  []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute)}, // 1 per 6s
		MaxWait: time.Nanosecond,                                               // refuse rather than queue
	}, map[string]quota.Policy{
		"a": {Limits: []quota.Limit{quota.PerMinute(rq, 5).WithBurst(time.Minute)}},
		"b": {Limits: []quota.Limit{quota.PerMinute(rq, 5).WithBurst(time.Minute)}},
	})
	grants := map[string]int{}
	for round := range 8 {
		for _, tenant := range []string{"a", "b", "", "c"} { // c has no policy
			d := e.on(tenant).reserve(tenant+"-"+string(rune('0'+round)), reqs(1))
			switch d.Outcome {
			case quota.Granted:
				grants[tenant]++
			case quota.Refused:
				require.Equal(t, quota.Capacity, d.Reason)
			default:
				require.Failf(t, "queued with MaxWait 1ns", "%+v", d)
			}
		}
	}
	require.Equal(t, map[string]int{"a": 3, "b": 3, "": 2, "c": 2}, grants, "ten grants in all: the account's limit")
	e.level(rq, 0)
	e.on("a").level(rq, 2)
	e.on("b").level(rq, 2)
	e.on("c").level(rq, 0) // c's budget is the account's

	// Waits: the longer of the tenant's and the account's.
	q := s.setupTenants(t, "nested-waits", &quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute)}, // 1 per 6s
	}, map[string]quota.Policy{
		"a": {Limits: []quota.Limit{quota.PerMinute(rq, 5).WithBurst(time.Minute)}, MaxWait: 20 * time.Second}, // 1 per 12s
	})
	a := q.on("a")
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		a.expect(granted, id, reqs(1))
	}
	a.expect(queued(12*time.Second, rq), "a6", reqs(1)) // the tenant binds
	q.levels(map[quota.Axis]float64{rq: 4})
	a.level(rq, -1)
	for _, id := range []string{"u1", "u2", "u3", "u4"} {
		q.expect(granted, id, reqs(1))
	}
	q.expect(queued(6*time.Second, rq), "u5", reqs(1))
	q.level(rq, -1)
	require.Equal(t, []quota.TenantLine{{Tenant: "", Tickets: 1, Cost: reqs(1)}, {Tenant: "a", Tickets: 1, Cost: reqs(1)}},
		q.snapshot().Line, "the account's line, per tenant")
	require.Equal(t, []quota.TenantLine{{Tenant: "a", Tickets: 1, Cost: reqs(1)}}, a.snapshot().Line, "a's own")
	// a7 waits 24s for its own budget, past its MaxWait of 20s: refused,
	// charging neither budget.
	a.expect(refused(24*time.Second, quota.Capacity, rq), "a7", reqs(1))
	q.level(rq, -1)
	a.level(rq, -1)
	q.clock.Advance(24 * time.Second) // the account refills 4, a's budget 2
	a.expect(granted, "a6", reqs(1))
	q.expect(granted, "u5", reqs(1))
	for _, id := range []string{"u6", "u7", "u8"} {
		q.expect(granted, id, reqs(1))
	}
	// Now the account binds: a's budget holds 1, the account none.
	a.expect(queued(6*time.Second, rq), "a8", reqs(1))
	q.level(rq, -1)
	a.level(rq, 0)

	// A spent daily window refuses from either budget, until its reset.
	d := s.setupTenants(t, "nested-daily", &quota.Policy{
		Limits: []quota.Limit{quota.PerDay(rq, 5, nil)},
	}, map[string]quota.Policy{"a": {Limits: []quota.Limit{quota.PerDay(rq, 3, nil)}}})
	da := d.on("a")
	for _, id := range []string{"a1", "a2", "a3"} {
		da.expect(granted, id, reqs(1))
	}
	da.expect(refused(6*time.Hour, quota.DailyLimit, rpd), "a4", reqs(1))
	d.expect(granted, "u1", reqs(1))
	d.expect(granted, "u2", reqs(1))
	d.expect(refused(6*time.Hour, quota.DailyLimit, rpd), "u3", reqs(1))
	d.level(rpd, 0)
	da.level(rpd, 0)

	// A tenant whose account has no policy is a budget of its own.
	solo := s.setupTenants(t, "nested-solo", nil, map[string]quota.Policy{
		"a": {Limits: []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)}},
	})
	sa := solo.on("a")
	sa.expect(granted, "a1", reqs(1))
	sa.expect(queued(time.Second, rq), "a2", reqs(1))
	_, err := solo.store.Reserve(solo.ctx, quota.Reservation{Key: solo.key, Ticket: "u1", Cost: reqs(1)})
	require.ErrorIs(t, err, quota.ErrNoPolicy)
}

// testNestedOversize: a cost larger than either budget can ever hold fails
// at once, naming the budget it cannot fit.
func testNestedOversize(t *testing.T, s suite) {
	e := s.setupTenants(t, "nested-oversize", &quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(tk, 1000).WithBurst(time.Minute)},
	}, map[string]quota.Policy{"a": {Limits: []quota.Limit{quota.PerMinute(tk, 2000).WithBurst(time.Minute), quota.PerMinute(rq, 10).WithBurst(time.Minute)}}})
	requireOversize(t, e.on("a"), "big", tokens(1500), quota.Normal,
		quota.OversizeError{Key: e.key, Axis: tk, Cost: 1500, Capacity: 1000})
	requireOversize(t, e.on("a"), "many", reqs(11), quota.Normal,
		quota.OversizeError{Key: e.tenant("a"), Axis: rq, Cost: 11, Capacity: 10})
	e.level(tk, 1000)
}

// testNestedPause: a pause of the account stops every tenant under it; a
// tenant's own pause stops that tenant alone, and the later of the two
// answers.
func testNestedPause(t *testing.T, s suite) {
	e := s.setupTenants(t, "nested-pause", &quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)},
	}, map[string]quota.Policy{
		"a": {Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}},
		"b": {Limits: []quota.Limit{quota.PerMinute(rq, 60).WithBurst(time.Minute)}},
	})
	a, b, c := e.on("a"), e.on("b"), e.on("c") // c has no policy
	a.expect(granted, "a1", reqs(1))

	e.pause(10*time.Second, quota.PauseOverloaded)
	for _, x := range []*env{e, a, b, c} {
		x.expect(paused(quota.Refused, 10*time.Second, quota.PauseOverloaded), "p-"+x.key.Tenant, reqs(1))
	}
	// a1 was granted before the pause: asked again, it waits it out.
	a.expect(paused(quota.Queued, 10*time.Second, quota.PauseOverloaded), "a1", reqs(1))
	require.True(t, a.snapshot().PausedUntil.IsZero(), "a's own budget is not paused")
	requireTime(t, start().Add(10*time.Second), e.snapshot().PausedUntil, "the account's is")

	a.pause(30*time.Second, quota.PauseOverloaded)
	a.expect(paused(quota.Refused, 30*time.Second, quota.PauseOverloaded), "a2", reqs(1))
	e.clock.Advance(10 * time.Second)
	e.expect(granted, "u1", reqs(1))
	b.expect(granted, "b1", reqs(1))
	c.expect(granted, "c1", reqs(1))
	a.expect(paused(quota.Refused, 20*time.Second, quota.PauseOverloaded), "a2", reqs(1))
	a.expect(paused(quota.Queued, 20*time.Second, quota.PauseOverloaded), "a1", reqs(1))
	e.clock.Advance(20 * time.Second)
	a.expect(granted, "a1", reqs(1)) // its place, charged once
	a.expect(granted, "a2", reqs(1))
	e.level(rq, 59)
	a.level(rq, 59)
	b.level(rq, 60)
}

// testNestedSettle: settling a tenant's call corrects both budgets,
// cancelling refunds both, and a grant gone by its settlement charges both
// what it used beyond its estimate; a ticket belongs to the tenant it was
// reserved under.
func testNestedSettle(t *testing.T, s suite) {
	e := s.setupTenants(t, "nested-settle", &quota.Policy{
		Limits:   []quota.Limit{quota.PerMinute(tk, 6000).WithBurst(time.Minute), quota.PerDay(tk, 100000, nil)},
		LeaseTTL: 10 * time.Second,
	}, map[string]quota.Policy{"a": {Limits: []quota.Limit{quota.PerMinute(tk, 3000).WithBurst(time.Minute), quota.PerDay(tk, 10000, nil)}}})
	a := e.on("a")
	a.expect(granted, "a1", tokens(1000))
	a.expect(granted, "a2", tokens(500))
	e.levels(map[quota.Axis]float64{tk: 4500, tpd: 98500})
	a.levels(map[quota.Axis]float64{tk: 1500, tpd: 8500})

	a.settle("a1", tokens(400))
	e.levels(map[quota.Axis]float64{tk: 5100, tpd: 99100})
	a.levels(map[quota.Axis]float64{tk: 2100, tpd: 9100})
	a.cancel("a2")
	e.levels(map[quota.Axis]float64{tk: 5600, tpd: 99600})
	a.levels(map[quota.Axis]float64{tk: 2600, tpd: 9600})

	a.expect(granted, "a3", tokens(100))
	e.clock.Advance(10 * time.Second) // a3's grant lapses; 1000 and 500 refilled
	err := e.store.Settle(e.ctx, quota.Settlement{Key: a.key, Ticket: "a3", Actual: tokens(300), Charged: tokens(100)})
	require.ErrorIs(t, err, quota.ErrUnknownTicket)
	e.levels(map[quota.Axis]float64{tk: 6000 - 200, tpd: 99500 - 200})
	a.levels(map[quota.Axis]float64{tk: 3000 - 200, tpd: 9500 - 200})

	// One namespace of tickets per account: a ticket is its tenant's.
	a.expect(granted, "t", tokens(100))
	for _, other := range []quota.Key{e.key, e.tenant("b")} {
		_, err := e.store.Reserve(e.ctx, quota.Reservation{Key: other, Ticket: "t", Cost: tokens(100)})
		requireInvalid(t, err, "ticket")
		requireInvalid(t, e.store.Settle(e.ctx, quota.Settlement{Key: other, Ticket: "t", Actual: tokens(1)}), "ticket")
		requireInvalid(t, e.store.Cancel(e.ctx, other, "t"), "ticket")
		_, err = e.store.Renew(e.ctx, other, "t", 0)
		requireInvalid(t, err, "ticket")
	}
	a.settle("t", tokens(100))
}

// testNestedConcurrency: a tenant's call takes a slot of its own budget and
// one of its account's, and waits while either is full.
func testNestedConcurrency(t *testing.T, s suite) {
	e := s.setupTenants(t, "nested-concurrency", &quota.Policy{
		Limits:   []quota.Limit{quota.Concurrent(3)},
		LeaseTTL: 10 * time.Second,
	}, map[string]quota.Policy{"a": {Limits: []quota.Limit{quota.Concurrent(2)}, LeaseTTL: time.Minute}})
	a, b := e.on("a"), e.on("b")
	lease := leased(start().Add(10 * time.Second)) // the shorter LeaseTTL
	a.expect(lease, "a1", quota.Cost{})
	a.expect(lease, "a2", quota.Cost{})
	a.expect(concurrencyFull(quota.DefaultLeaseRetry), "a3", quota.Cost{}) // a's budget is full
	e.expect(lease, "u1", quota.Cost{})
	b.expect(concurrencyFull(quota.DefaultLeaseRetry), "b1", quota.Cost{}) // the account's is
	e.level(cc, 0)
	a.level(cc, 0)

	e.settle("u1", quota.Cost{})
	a.expect(concurrencyFull(quota.DefaultLeaseRetry), "a3", quota.Cost{})
	b.expect(lease, "b1", quota.Cost{})
	e.level(cc, 0)

	e.clock.Advance(9500 * time.Millisecond) // a1, a2 and b1 expire at 10s
	a.expect(concurrencyFull(500*time.Millisecond), "a3", quota.Cost{})
	e.clock.Advance(500 * time.Millisecond)
	a.expect(leased(start().Add(20*time.Second)), "a3", quota.Cost{})
	a.level(cc, 1)
	e.level(cc, 2)
	a.settle("a3", quota.Cost{})
	a.level(cc, 2)
	e.level(cc, 3)
}

// testNestedSignals: Observe and Pause of a tenant's key act on its own
// budget; what a provider reports with a tenant's call, and what its
// tokenizer counts, are the account's (a provider meters the account); a
// tenant's snapshot reports its own axes and the ratio its calls are
// charged at.
func testNestedSignals(t *testing.T, s suite) {
	e := s.setupTenants(t, "nested-signals", &quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(tk, 60000).WithBurst(time.Minute), quota.PerMinute(quota.InputTokens, 60000).WithBurst(time.Minute)},
	}, map[string]quota.Policy{"a": {Limits: []quota.Limit{quota.PerMinute(tk, 6000).WithBurst(time.Minute)}}})
	a := e.on("a")
	a.observe(quota.Observation{Axis: tk, Limit: -1, Remaining: 1000})
	a.level(tk, 1000)
	e.level(tk, 60000)
	e.observe(quota.Observation{Axis: tk, Limit: -1, Remaining: 30000})
	e.level(tk, 30000)
	a.level(tk, 1000)

	est := quota.Cost{Requests: 1, Tokens: 200, InputTokens: 100, OutputTokens: 100}
	used := quota.Cost{Requests: 1, Tokens: 300, InputTokens: 200, OutputTokens: 100} // twice the prompt estimated
	for _, id := range []string{"a1", "a2"} {
		d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: a.key, Ticket: id, Cost: est, Prompt: 100})
		require.NoError(t, err)
		requireDecision(t, granted, d, id)
		require.Equal(t, est, d.Charged, "%s: charged at the ratio learned so far, 1", id)
		require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: a.key, Ticket: id, Actual: used,
			Counted: true, Prompt: 100, Observed: []quota.Observation{{Axis: tk, Limit: -1, Remaining: 20000}}}))
	}
	e.level(tk, 19700) // lowered to the report, then charged a2's 300
	a.level(tk, 400)   // 1000 less the calls' 600: the reports are not the tenant's
	require.InDelta(t, 2, e.snapshot().EstimateRatio, RatioDelta, "the account learned from its tenant's calls")
	require.InDelta(t, 2, a.snapshot().EstimateRatio, RatioDelta, "and charges them at what it learned")
	d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: a.key, Ticket: "a3", Cost: est, Prompt: 100})
	require.NoError(t, err)
	require.Equal(t, quota.Cost{Requests: 1, Tokens: 300, InputTokens: 200, OutputTokens: 100}, d.Charged)
	a.level(tk, 100)
}

// call is one governed call in a fair-share case: its tenant, ticket and
// cost, and when its caller comes back.
type call struct {
	tenant, ticket string
	cost           quota.Cost
	next           time.Time
}

// served is a call granted at some time since start().
type served struct {
	ticket string
	at     time.Duration
}

// calls returns n calls of tenant, tickets prefix0…, each costing cost.
func calls(tenant, prefix string, n int, cost quota.Cost) []*call {
	cs := make([]*call, n)
	for i := range cs {
		cs[i] = &call{tenant: tenant, ticket: prefix + strconv.Itoa(i), cost: cost}
	}
	return cs
}

// queue reserves each call now, requiring it granted or queued, and
// returns the waits Reserve told, by ticket.
func (e *env) queue(cs []*call) map[string]time.Duration {
	e.t.Helper()
	waits := map[string]time.Duration{}
	for _, c := range cs {
		d := e.on(c.tenant).reserve(c.ticket, c.cost)
		require.Contains(e.t, []quota.Outcome{quota.Granted, quota.Queued}, d.Outcome, "%s: %+v", c.ticket, d)
		waits[c.ticket] = d.Wait
		c.next = e.clock.Now().Add(d.Wait)
		if d.Outcome == quota.Granted {
			c.next = time.Time{}
			e.on(c.tenant).settle(c.ticket, c.cost)
		}
	}
	return waits
}

// serve plays the callers of cs until every call is granted: the clock
// moves to the next time a caller was told to come back, and each caller
// due comes back (in cs's order), running (and settling at once) when
// granted. It returns the grants in the order they were made, with the
// calls granted by queue first, at their times.
func (e *env) serve(cs []*call) []served {
	e.t.Helper()
	var order []served
	for {
		var due time.Time
		for _, c := range cs {
			if !c.next.IsZero() && (due.IsZero() || c.next.Before(due)) {
				due = c.next
			}
		}
		if due.IsZero() {
			return order
		}
		e.clock.Set(due)
		for _, c := range cs {
			if c.next.IsZero() || c.next.After(due) {
				continue
			}
			d := e.on(c.tenant).reserve(c.ticket, c.cost)
			switch d.Outcome {
			case quota.Granted:
				order = append(order, served{c.ticket, due.Sub(start())})
				c.next = time.Time{}
				e.on(c.tenant).settle(c.ticket, c.cost)
			case quota.Queued:
				require.Positive(e.t, d.Wait, "%s: queued with no wait: %+v", c.ticket, d)
				c.next = due.Add(d.Wait)
			default:
				require.Failf(e.t, "refused in line", "%s: %+v", c.ticket, d)
			}
		}
	}
}

func tickets(order []served) []string {
	ids := make([]string, len(order))
	for i, s := range order {
		ids[i] = s.ticket
	}
	return ids
}

// testFairShare: places in a saturated account's line go to tenants by
// turns, not by arrival: a tenant that queued a burst waits behind its own
// calls while a tenant that comes later is served between them, both by
// the waits Reserve tells and by the order calls are granted as time goes
// on; the account is never granted more than its budget.
func testFairShare(t *testing.T, s suite) {
	e := s.setupTenants(t, "fair-share", &quota.Policy{
		Limits:  []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)},
		MaxWait: time.Hour,
	}, nil)
	burst := calls("a", "a", 10, reqs(1))
	waits := e.queue(burst)
	for i := range 10 { // alone in line, a's calls queue first come, first served
		require.InDelta(t, float64(time.Duration(i)*time.Second), float64(waits["a"+strconv.Itoa(i)]), float64(TimeDelta), "a%d", i)
	}
	late := calls("b", "b", 3, reqs(1))
	waits = e.queue(late)
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second} {
		require.InDelta(t, float64(want), float64(waits["b"+strconv.Itoa(i)]), float64(TimeDelta),
			"b%d goes after a's next %d, not after all nine", i, i+1)
	}
	e.level(rq, -12)
	require.Equal(t, []quota.TenantLine{{Tenant: "a", Tickets: 9, Cost: reqs(9)}, {Tenant: "b", Tickets: 3, Cost: reqs(3)}},
		e.snapshot().Line)

	// a2 was told 2s; b0 took that place, and a2 learns so when it asks.
	e.on("a").expect(queued(3*time.Second, rq), "a2", reqs(1))

	order := e.serve(append(burst, late...))
	require.Equal(t, []string{"a1", "b0", "a2", "b1", "a3", "b2", "a4", "a5", "a6", "a7", "a8", "a9"}, tickets(order))
	for i, g := range order {
		requireDuration(t, time.Duration(i+1)*time.Second, g.at, "%s granted", g.ticket)
	}
	e.level(rq, 0)
	require.Empty(t, e.snapshot().Line)

	// A place taken ahead and given back returns the places behind it to
	// the maturities they were told first, never earlier.
	c := s.setupTenants(t, "fair-share-cancel", &quota.Policy{
		Limits: []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)},
	}, nil)
	c.queue(calls("a", "a", 4, reqs(1))) // a0 now, a1..a3 at 1s..3s
	c.on("b").expect(queued(2*time.Second, rq), "b0", reqs(1))
	c.on("a").expect(queued(3*time.Second, rq), "a2", reqs(1))
	c.on("b").cancel("b0")
	c.on("a").expect(queued(2*time.Second, rq), "a2", reqs(1))
	c.on("a").expect(queued(3*time.Second, rq), "a3", reqs(1))
}

// testFairWeights: tenants share a saturated account's line in proportion
// to their weights, by cost: two calls of a tenant weighing 2 for each of
// one weighing 1; and equal weights get equal tokens, however each splits
// them into calls.
func testFairWeights(t *testing.T, s suite) {
	e := s.setupTenants(t, "fair-weights", &quota.Policy{
		Limits:        []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second)},
		MaxWait:       time.Hour,
		TenantWeights: map[string]float64{"gold": 2},
	}, nil)
	gold, std := calls("gold", "g", 13, reqs(1)), calls("std", "s", 12, reqs(1))
	e.queue(gold) // g0 runs now
	e.queue(std)
	order := tickets(e.serve(append(gold, std...)))
	require.Equal(t, []string{"g1", "g2", "s0", "g3", "g4", "s1", "g5", "g6", "s2", "g7", "g8", "s3"}, order[:12])

	// By cost: a tenant of large calls and one of small ones get the
	// same tokens per second.
	c := s.setupTenants(t, "fair-cost", &quota.Policy{
		Limits:  []quota.Limit{quota.Per(tk, 100, time.Second).WithBurst(time.Second)},
		MaxWait: time.Hour,
	}, nil)
	big, small := calls("big", "B", 8, tokens(50)), calls("small", "S", 40, tokens(10))
	c.queue(big) // two now, six queued
	c.queue(small)
	got := map[byte]int64{}
	for _, g := range c.serve(append(big, small...)) {
		if g.at > 4*time.Second { // both still have calls in line until then
			break
		}
		got[g.ticket[0]] += map[byte]int64{'B': 50, 'S': 10}[g.ticket[0]]
	}
	require.InDelta(t, got['B'], got['S'], 50, "tokens granted to each from the line by 4s: %v", got)
	require.Equal(t, int64(400), got['B']+got['S'], "4s of refill, all granted")
}

// testFairSingleTenant: a tenant alone in its account's line, whatever its
// weight, queues first come, first served, at the waits an untenanted line
// has.
func testFairSingleTenant(t *testing.T, s suite) {
	p := quota.Policy{Limits: []quota.Limit{quota.Per(rq, 1, time.Second).WithBurst(time.Second), quota.PerMinute(tk, 600).WithBurst(time.Minute)}}
	e := s.setupTenants(t, "fair-single", &p, map[string]quota.Policy{"a": {Weight: 3}})
	a := e.on("a")
	small, large := quota.Cost{Requests: 1, Tokens: 20}, quota.Cost{Requests: 1, Tokens: 600}
	a.expect(granted, "a0", small)
	a.expect(queued(time.Second, rq), "a1", small)
	a.expect(queued(2*time.Second, rq), "a2", small)
	a.expect(queued(6*time.Second, tk), "a3", large)                               // 540 left, 10 a second
	a.expect(queued(7*time.Second, tk), "a4", quota.Cost{Requests: 1, Tokens: 10}) // behind a3's tokens
	e.clock.Advance(time.Second)
	a.expect(granted, "a1", small)
	a.expect(queued(time.Second, rq), "a2", small)
	a.expect(queued(5*time.Second, tk), "a3", large)
	a.expect(queued(6*time.Second, tk), "a4", quota.Cost{Requests: 1, Tokens: 10})
	e.levels(map[quota.Axis]float64{rq: -3, tk: -60})
}
