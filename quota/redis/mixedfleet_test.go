package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/released"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// A mixed fleet: callers whose attempts land on workers of the previous
// release (package released) and of this one, on one Redis, the way
// Temporal hands an activity's retries to whichever worker polls first.

// The mixed fleet's keys: an account saturated by three tenants (one with
// a nested budget of its own, one weighed double), and a key with a daily
// window small enough to be spent early in a run.
var (
	mixAccount = quota.Key{Provider: "openai", Account: "acct", Model: "gpt-4o"}
	mixDaily   = quota.Key{Provider: "anthropic", Model: "claude"}
	mixKeys    = []quota.Key{mixAccount, mixTenant("t1"), mixTenant("t2"), mixTenant("vip"), mixDaily}
)

func mixTenant(name string) quota.Key {
	k := mixAccount
	k.Tenant = name
	return k
}

const (
	mixLeaseTTL = 750 * time.Millisecond
	mixMaxWait  = 200 * time.Millisecond
	mixHold     = 3 * time.Millisecond
	// mixLapse is how long after a run every place and queued ticket its
	// callers left has lapsed: the longest wait, then the lease TTL.
	mixLapse = mixMaxWait + mixLeaseTTL + 100*time.Millisecond
)

// mixBudgets are the budgets of the mixed fleet's keys, by name, and the
// budgets each key charges.
var (
	mixBudgets = map[string][]quota.Limit{
		"account": {
			quota.Per(quota.Requests, 40, time.Second).WithBurst(250 * time.Millisecond),
			quota.Per(quota.Tokens, 4000, time.Second).WithBurst(250 * time.Millisecond),
			quota.Concurrent(6),
		},
		"vip": {
			quota.Per(quota.Requests, 12, time.Second).WithBurst(250 * time.Millisecond),
			quota.Concurrent(2),
		},
		"daily": {
			quota.Per(quota.Requests, 40, time.Second).WithBurst(250 * time.Millisecond),
			quota.PerDay(quota.Requests, 30, nil),
		},
	}
	mixCharges = map[quota.Key][]string{
		mixAccount: {"account"}, mixTenant("t1"): {"account"}, mixTenant("t2"): {"account"},
		mixTenant("vip"): {"account", "vip"}, mixDaily: {"daily"},
	}
)

func mixPolicies(t *testing.T) quota.Policies {
	t.Helper()
	policy := func(budget string) quota.Policy {
		return quota.Policy{Limits: mixBudgets[budget], MaxWait: mixMaxWait, LeaseTTL: mixLeaseTTL}
	}
	account := policy("account")
	account.TenantWeights = map[string]float64{"t2": 2}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		mixAccount: account, mixTenant("vip"): policy("vip"), mixDaily: policy("daily"),
	})
	require.NoError(t, err)
	return ps
}

// worker is one worker process: a store of either release, with a client
// of its own.
type worker struct {
	name  string
	old   bool
	store quota.Store
}

// workers returns n workers of the previous release (old) or of this one
// on srv.
func workers(t *testing.T, srv *redistest.Server, ps quota.Policies, old bool, n int) []worker {
	t.Helper()
	ws := make([]worker, n)
	for i := range ws {
		var (
			s   quota.Store
			err error
		)
		if old {
			s, err = released.New(srv.Client(), ps, released.Options{})
			ws[i].name = fmt.Sprintf("old-%d", i)
		} else {
			s, err = redis.New(srv.Client(), ps, redis.Options{})
			ws[i].name = fmt.Sprintf("new-%d", i)
		}
		require.NoError(t, err)
		ws[i].old, ws[i].store = old, s
	}
	return ws
}

// fleet is the set of workers taking attempts, which a scenario changes as
// it runs, and the count of losses so far (two steps per loss: one before
// the state goes, one after).
type fleet struct {
	mu     sync.Mutex
	active []worker
	losses int
	// reserves is read-held by every Reserve, until the ledger has its
	// reply, and held by a loss: the state goes between two Reserves, so
	// the ledger's order of replies is Redis's.
	reserves sync.RWMutex
}

func (f *fleet) set(ws []worker) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active = ws
}

func (f *fleet) pick(rng *rand.Rand) (worker, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.active) == 0 {
		return worker{}, false
	}
	return f.active[rng.IntN(len(f.active))], true
}

func (f *fleet) lossStep() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.losses++
}

func (f *fleet) lossCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.losses
}

// ledger counts what the fleet's stores granted, as the provider would
// see it: the calls in flight on each budget at every instant, the units
// each budget's calls used (what they were settled at), and every error.
type ledger struct {
	mu       sync.Mutex
	inFlight map[string]int
	peak     map[string]int
	used     map[string]*[quota.SpendPerMonth + 1]int64
	// outcomes counts replies by release and outcome ("old granted");
	// crossed counts tickets queued by one release and granted by the
	// other ("old→new").
	outcomes map[string]int
	crossed  map[string]int
	failures []string
	// charges counts the replies on mixDaily that may have charged its
	// daily window (granted or queued), seenAt the count at each worker's
	// last reply on it, and unseen, at a loss, the most charges any worker
	// had not seen a reply of: a worker recovers the window as used as it
	// last saw it, so the fleet may be granted up to that many more.
	charges int
	seenAt  map[string]int
	unseen  int
}

func newLedger() *ledger {
	l := &ledger{inFlight: map[string]int{}, peak: map[string]int{}, used: map[string]*[quota.SpendPerMonth + 1]int64{},
		outcomes: map[string]int{}, crossed: map[string]int{}, seenAt: map[string]int{}}
	for b := range mixBudgets {
		l.used[b] = new([quota.SpendPerMonth + 1]int64)
	}
	return l
}

func release(old bool) string {
	if old {
		return "old"
	}
	return "new"
}

func (l *ledger) count(w worker, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes[release(w.old)+" "+what]++
}

// replied records w's reply d on k.
func (l *ledger) replied(w worker, k quota.Key, d quota.Decision) {
	if k != mixDaily {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.Outcome != quota.Refused {
		l.charges++
	}
	l.seenAt[w.name] = l.charges
}

// lost records, as the state goes, the most charges on mixDaily one of ws
// had not seen.
func (l *ledger) lost(ws []worker) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range ws {
		l.unseen = max(l.unseen, l.charges-l.seenAt[w.name])
	}
}

func (l *ledger) cross(from, to worker) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.crossed[release(from.old)+"→"+release(to.old)]++
}

func (l *ledger) fail(w worker, op string, k quota.Key, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, fmt.Sprintf("%s %s %s: %v", w.name, op, k, err))
}

// enter and leave bracket a call's time at the provider on each budget
// its key charges.
func (l *ledger) enter(k quota.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range mixCharges[k] {
		l.inFlight[b]++
		l.peak[b] = max(l.peak[b], l.inFlight[b])
	}
}

func (l *ledger) leave(k quota.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range mixCharges[k] {
		l.inFlight[b]--
	}
}

func (l *ledger) spent(k quota.Key, c quota.Cost) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range mixCharges[k] {
		for _, a := range quota.Axes() {
			l.used[b][a] += c.On(a)
		}
	}
}

// caller is one goroutine of calls: each call a fresh ticket on a key of
// mixKeys, each attempt on a worker the fleet picks.
type caller struct {
	id    string
	rng   *rand.Rand
	fleet *fleet
	l     *ledger
}

// call makes one call until it is granted and run, refused, or given up:
// a tenth of the calls that wait are abandoned (their places lapse) and a
// tenth cancelled; a quarter take a place first and claim it once mature.
func (c *caller) call(ctx context.Context, n int, deadline time.Time) {
	ticket := fmt.Sprintf("%s-%d", c.id, n)
	k := mixKeys[c.rng.IntN(len(mixKeys))]
	cost := quota.Cost{Requests: 1, Tokens: 50 + c.rng.Int64N(100)}
	place := c.rng.IntN(4) == 0
	var queuedBy *worker
	for time.Now().Before(deadline) {
		w, ok := c.fleet.pick(c.rng)
		if !ok {
			return
		}
		losses := c.fleet.lossCount()
		c.fleet.reserves.RLock()
		d, err := w.store.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: cost, Place: place})
		if err == nil {
			c.l.replied(w, k, d)
		}
		c.fleet.reserves.RUnlock()
		if err != nil {
			c.l.fail(w, "reserve", k, err)
			return
		}
		switch d.Outcome {
		case quota.Granted:
			c.l.count(w, "granted")
			if queuedBy != nil && queuedBy.old != w.old {
				c.l.cross(*queuedBy, w)
			}
			c.run(ctx, w, k, ticket, d, losses)
			return
		case quota.Refused:
			c.l.count(w, "refused")
			time.Sleep(min(d.Wait/4, 20*time.Millisecond))
			return
		}
		c.l.count(w, "queued")
		queuedBy = &w
		switch c.rng.IntN(10) {
		case 0:
			return // abandoned: its place lapses and is refunded
		case 1:
			if err := w.store.Cancel(ctx, k, ticket); err != nil {
				c.l.fail(w, "cancel", k, err)
			}
			return
		}
		wait := d.Wait
		if d.Reason == quota.ConcurrencyFull {
			wait = min(wait, 2*time.Millisecond) // a slot frees within a hold
		}
		place = false // claim the place once mature
		time.Sleep(wait)
	}
}

// run is a granted call at the provider: it waits for its start, holds
// its slots, renews half the time, and is settled at some of its estimate,
// or a tenth of the time cancelled, on the worker that was granted it.
// ErrUnknownTicket is excused only for a grant a loss may have taken.
func (c *caller) run(ctx context.Context, w worker, k quota.Key, ticket string, d quota.Decision, losses int) {
	excused := func(err error) bool {
		return errors.Is(err, quota.ErrUnknownTicket) && c.fleet.lossCount() != losses
	}
	time.Sleep(d.Start)
	c.l.enter(k)
	time.Sleep(mixHold)
	if c.rng.IntN(2) == 0 {
		if _, err := w.store.Renew(ctx, k, ticket, 0); err != nil && !excused(err) {
			c.l.fail(w, "renew", k, err)
		}
		time.Sleep(mixHold)
	}
	c.l.leave(k)
	if c.rng.IntN(10) == 0 {
		if err := w.store.Cancel(ctx, k, ticket); err != nil {
			c.l.fail(w, "cancel", k, err)
		}
		return
	}
	actual := quota.Cost{Requests: 1, Tokens: d.Charged.Tokens * (50 + c.rng.Int64N(51)) / 100}
	c.l.spent(k, actual) // it ran, whatever Settle finds
	err := w.store.Settle(ctx, quota.Settlement{Key: k, Ticket: ticket, Actual: actual, Charged: d.Charged})
	if err != nil && !excused(err) {
		c.l.fail(w, "settle", k, err)
	}
	if c.rng.IntN(20) == 0 {
		if _, err := w.store.Snapshot(ctx, k); err != nil {
			c.l.fail(w, "snapshot", k, err)
		}
	}
}
