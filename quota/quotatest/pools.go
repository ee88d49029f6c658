package quotatest

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
)

// poolEnv is a store holding a pool's members, each its own budget.
type poolEnv struct {
	*env
	members []quota.Key
}

// setupPool builds a store over one policy per member, named name-0,
// name-1, …; the env's key is the first member's.
func (s suite) setupPool(t *testing.T, name string, policies ...quota.Policy) *poolEnv {
	t.Helper()
	m := make(map[quota.Key]quota.Policy, len(policies))
	members := make([]quota.Key, len(policies))
	for i, p := range policies {
		members[i] = s.key(name + "-" + string(rune('0'+i)))
		m[members[i]] = p
	}
	e := s.setupKeys(t, members[0], m, start())
	ps, err := quota.NewPolicies(m)
	require.NoError(t, err)
	_, err = pool.New(ps, map[quota.Key][]quota.Key{s.key(name): members})
	require.NoError(t, err, "the pool is valid")
	return &poolEnv{env: e, members: members}
}

// admit admits ticket on the pool, asking members[first] first, and
// requires it to land on member want with the decision d.
func (p *poolEnv) admit(ticket string, cost quota.Cost, first, want int, d quota.Decision) pool.Admission {
	p.t.Helper()
	a, err := pool.Admit(p.ctx, p.store, p.members, quota.Reservation{Key: p.members[0], Ticket: ticket, Cost: cost}, first)
	require.NoError(p.t, err, "pool.Admit(%s)", ticket)
	require.Equal(p.t, want, a.Index, "%s: member of %+v", ticket, a)
	require.Equal(p.t, p.members[want], a.Member, "%s: member key", ticket)
	requireDecision(p.t, d, a.Decision, ticket)
	return a
}

// on returns the env of member i.
func (p *poolEnv) on(i int) *env {
	e := *p.env
	e.key = p.members[i]
	return &e
}

// levels requires each member's Available on axis, in order.
func (p *poolEnv) levelsOf(axis quota.Axis, want ...float64) {
	p.t.Helper()
	for i, w := range want {
		require.InDelta(p.t, w, p.on(i).axis(axis).Available, LevelDelta, "member %d's %s", i, axis)
	}
}

// testPoolSpread: a pool admits a call on the first member with room, never
// queueing it while another member has some; it queues on the member whose
// place matures soonest only when all are full, and gives back every place
// it took on the way. Admitting again under the ticket is idempotent.
func testPoolSpread(t *testing.T, s suite) {
	perMin := func(n int64) quota.Policy {
		return quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, n).WithBurst(time.Minute)}}
	}
	p := s.setupPool(t, "pool-spread", perMin(2), perMin(2), perMin(4))
	p.admit("a", reqs(1), 0, 0, granted)
	p.admit("b", reqs(1), 0, 0, granted)
	p.admit("c", reqs(1), 0, 1, granted) // member 0 is full: its place is given back
	p.levelsOf(rq, 0, 1, 4)
	p.admit("d", reqs(1), 0, 1, granted)
	for _, ticket := range []string{"e", "f", "g", "h"} {
		p.admit(ticket, reqs(1), 0, 2, granted)
	}
	p.levelsOf(rq, 0, 0, 0)

	// All full: member 2 refills a request in 15s, the others in 30s.
	p.admit("i", reqs(1), 0, 2, queued(15*time.Second, rq))
	p.levelsOf(rq, 0, 0, -1)
	p.admit("i", reqs(1), 0, 2, queued(15*time.Second, rq)) // the same place, nothing charged twice
	p.levelsOf(rq, 0, 0, -1)
	p.clock.Advance(15 * time.Second)
	p.admit("i", reqs(1), 0, 2, granted)
	p.levelsOf(rq, 0.5, 0.5, 0)

	// The member asked first takes a call when it has room.
	p.clock.Advance(15 * time.Second)
	p.admit("j", reqs(1), 1, 1, granted)
	p.levelsOf(rq, 1, 0, 1)
}

// testPoolSkip: a paused member (closed by a spend cap, or paused after a
// provider's pushback) is skipped while another has room, and its budget is
// left as it was; when every member is paused, the answer is the pause
// that ends soonest.
func testPoolSkip(t *testing.T, s suite) {
	perMin := quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute)}}
	p := s.setupPool(t, "pool-skip", perMin, perMin, perMin)
	p.on(0).pause(time.Hour, quota.PauseSpendCap)
	p.admit("a", reqs(1), 0, 1, granted)
	p.on(1).pause(5*time.Second, quota.PauseOverloaded)
	p.admit("b", reqs(1), 0, 2, granted)
	p.levelsOf(rq, 10, 9, 9)

	p.on(2).pause(2*time.Second, quota.PauseOverloaded)
	p.admit("c", reqs(1), 0, 2, paused(quota.Refused, 2*time.Second, quota.PauseOverloaded))
	p.levelsOf(rq, 10, 9, 9)
	p.clock.Advance(2*time.Second + time.Millisecond)
	p.admit("c", reqs(1), 0, 2, granted)
	p.clock.Advance(3 * time.Second)
	p.admit("d", reqs(1), 0, 1, granted) // member 1's pause is over, member 0 still closed
}

// testPoolRelease: a member whose concurrency slots are taken is passed
// over for one with a free slot, and the place it queued is given back; on
// a tie the member asked first keeps the call.
func testPoolRelease(t *testing.T, s suite) {
	one := quota.Policy{Limits: []quota.Limit{quota.Concurrent(1)}, LeaseTTL: 10 * time.Second}
	p := s.setupPool(t, "pool-release", one, one)
	t0 := start()
	p.admit("a", quota.Cost{}, 0, 0, leased(t0.Add(10*time.Second)))
	p.admit("b", quota.Cost{}, 0, 1, leased(t0.Add(10*time.Second)))
	p.levelsOf(cc, 0, 0)
	p.admit("c", quota.Cost{}, 1, 1, concurrencyFull(quota.DefaultLeaseRetry))
	p.on(0).settle("a", quota.Cost{})
	p.levelsOf(cc, 1, 0)
	p.admit("c", quota.Cost{}, 1, 0, leased(t0.Add(10*time.Second))) // its place on member 1 given back
	p.on(1).settle("b", quota.Cost{})
	p.levelsOf(cc, 0, 1)
	_, err := p.store.Renew(p.ctx, p.members[1], "c", 0)
	require.ErrorIs(t, err, quota.ErrUnknownTicket, "c holds nothing on member 1")
}

// testPoolOversize: a call too large for one member runs on another that
// can fit it; one too large for all is an *OversizeError.
func testPoolOversize(t *testing.T, s suite) {
	p := s.setupPool(t, "pool-oversize",
		quota.Policy{Limits: []quota.Limit{quota.PerMinute(tk, 100).WithBurst(time.Minute)}},
		quota.Policy{Limits: []quota.Limit{quota.PerMinute(tk, 1000).WithBurst(time.Minute)}})
	p.admit("a", tokens(500), 0, 1, granted)
	p.levelsOf(tk, 100, 500)
	_, err := pool.Admit(p.ctx, p.store, p.members, quota.Reservation{Key: p.members[0], Ticket: "b", Cost: tokens(5000)}, 0)
	require.ErrorIs(t, err, quota.ErrOversize)
	_, err = pool.Admit(p.ctx, p.store, p.members, quota.Reservation{Key: p.members[0], Cost: tokens(1)}, 0)
	require.ErrorIs(t, err, quota.ErrInvalid, "no ticket")
}

// testSharedLimit: model names a policy shares (Policy.Models, exact names
// and family patterns) are charged to its one budget, so that together
// they never exceed it; Settle, Cancel and Snapshot under any of the names
// reach that budget.
func testSharedLimit(t *testing.T, s suite) {
	k := s.key("shared")
	alias, fam := k, k
	alias.Model, fam.Model = "shared-alias", "shared-fam-"
	e := s.setupKeys(t, k, map[quota.Key]quota.Policy{k: {
		Limits: []quota.Limit{quota.PerMinute(rq, 3).WithBurst(time.Minute)},
		Models: []string{alias.Model, fam.Model + "*"},
	}}, start())
	on := func(model string) *env {
		f := *e
		f.key.Model = model
		return &f
	}
	e.expect(granted, "a", reqs(1))
	on(alias.Model).expect(granted, "b", reqs(1))
	on(fam.Model+"2024").expect(granted, "c", reqs(1))
	tenant := on(fam.Model + "latest")
	tenant.key.Tenant = "acme"
	tenant.expect(queued(20*time.Second, rq), "d", reqs(1)) // the account's one budget is spent
	snap := on(alias.Model).snapshot()
	require.Equal(t, k, snap.Key, "the snapshot names the shared budget")
	e.level(rq, -1)

	tenant.cancel("d")
	on(alias.Model).settle("b", quota.Cost{}) // refunds b's request
	e.level(rq, 1)
	on(fam.Model+"x").expect(granted, "e", reqs(1))
	e.expect(queued(20*time.Second, rq), "f", reqs(1))

	_, err := e.store.Reserve(e.ctx, quota.Reservation{Key: on("shared-other").key, Ticket: "g", Cost: reqs(1)})
	require.ErrorIs(t, err, quota.ErrNoPolicy, "a name no policy shares")
}

// testSharedLimitConcurrent: calls racing on two model names charged to
// one budget are granted, together, exactly what the budget holds.
func testSharedLimitConcurrent(t *testing.T, s suite) {
	k := s.key("shared-race")
	alias := k
	alias.Model = "shared-race-alias"
	e := s.setupKeys(t, k, map[quota.Key]quota.Policy{k: {
		Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute)},
		Models: []string{alias.Model},
	}}, start())
	granted := raceGrants(t, e, 40, func(i int) quota.Key {
		if i%2 == 0 {
			return k
		}
		return alias
	})
	require.Equal(t, 10, granted, "grants on the two names together")
}

// testPoolConcurrent: calls racing on a pool are granted, together, exactly
// what its members hold, none over a member's budget.
func testPoolConcurrent(t *testing.T, s suite) {
	perMin := quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 4).WithBurst(time.Minute)}}
	p := s.setupPool(t, "pool-race", perMin, perMin, perMin)
	var mu sync.Mutex
	var wg sync.WaitGroup
	granted, onMember := 0, make([]int, len(p.members))
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := pool.Admit(p.ctx, p.store, p.members, quota.Reservation{Key: p.members[0], Ticket: "t" + strconv.Itoa(i), Cost: reqs(1)}, i%len(p.members))
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if a.Decision.Outcome == quota.Granted {
				granted++
				onMember[a.Index]++
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 12, granted, "grants over the pool: %v", onMember)
	require.Equal(t, []int{4, 4, 4}, onMember)
}

// raceGrants reserves one request under n tickets at once, the i-th on
// key(i), and returns how many were granted.
func raceGrants(t *testing.T, e *env, n int, key func(i int) quota.Key) int {
	t.Helper()
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: key(i), Ticket: "t" + strconv.Itoa(i), Cost: reqs(1)})
			if assert.NoError(t, err) && d.Outcome == quota.Granted {
				granted.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(granted.Load())
}
