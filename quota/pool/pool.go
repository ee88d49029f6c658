// Package pool admits calls on keys served by several members (deployments
// or accounts of one provider, each with its own key, endpoint and limits):
// Admit reserves a call on the member of a Set's pool that can run it
// soonest, atomically on each member's own budget in any quota.Store.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/tollgate/tollgate/quota"
)

// invalid is a *quota.InvalidError naming field.
func invalid(field, value, problem, fix string) *quota.InvalidError {
	return &quota.InvalidError{Field: field, Value: value, Problem: problem, Fix: fix}
}

// Set names the keys served by several members: deployments or accounts
// (Azure regions, OpenAI projects, Anthropic workspaces) each with its own
// key, endpoint and limits, which serve one model. A call on a pool's key
// runs on one member, admitted where it can run soonest (Admit). Build
// it with New; the zero value holds none. It is read-only and safe for
// concurrent use.
type Set struct {
	byKey map[quota.Key][]quota.Key
}

// New validates m, pool keys to their members in order of preference,
// against ps and returns the set. A pool's key is account-wide (no Tenant)
// and has no policy of its own (its members' budgets are what is charged);
// it has at least one member. Each member is an account-wide key of the
// pool's provider with a policy in ps, is no pool itself, and is charged to
// a budget no other member of the pool is charged to (quota.Policies.Lookup), so
// that no budget counts a call twice. Errors are *quota.InvalidError, wrapped
// with the pool's key.
func New(ps quota.Policies, m map[quota.Key][]quota.Key) (Set, error) {
	keys := make([]quota.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	byKey := make(map[quota.Key][]quota.Key, len(m))
	for _, k := range keys {
		if err := validPool(ps, m, k, m[k]); err != nil {
			return Set{}, fmt.Errorf("pool %s: %w", k, err)
		}
		byKey[k] = append([]quota.Key(nil), m[k]...)
	}
	return Set{byKey: byKey}, nil
}

func validPool(ps quota.Policies, m map[quota.Key][]quota.Key, k quota.Key, members []quota.Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if k.Tenant != "" {
		return invalid("key.tenant", k.Tenant, "is set on a pool", "name the pool without a tenant: a tenant's calls on it are charged to its share of each member")
	}
	if b, _, ok := ps.Lookup(k); ok {
		return invalid("key", k.String(), "has a policy of its own (charged to "+b.String()+")",
			"give the limits to the members, or remove the policy: a pool's calls are charged to the member that runs them")
	}
	if len(members) == 0 {
		return invalid("members", "", "is empty", "list the keys (provider/account/model) of the deployments that serve the pool")
	}
	budgets := make(map[quota.Key]int, len(members))
	for i, mk := range members {
		field := "members[" + strconv.Itoa(i) + "]"
		if err := mk.Validate(); err != nil {
			var inv *quota.InvalidError
			if errors.As(err, &inv) {
				inv.Field = field + "." + inv.Field[len("key."):]
				return inv
			}
			return err
		}
		switch {
		case mk.Tenant != "":
			return invalid(field+".tenant", mk.Tenant, "is set on a member", "name the member's account-wide key; tenants share each member as they share any account")
		case mk.Provider != k.Provider:
			return invalid(field+".provider", mk.Provider, "is not the pool's provider "+strconv.Quote(k.Provider),
				"pool deployments of one provider; use fallbacks to move calls to another provider")
		}
		if _, nested := m[mk]; nested {
			return invalid(field, mk.String(), "is a pool itself", "list the members' own keys, not another pool")
		}
		b, _, ok := ps.Lookup(mk)
		if !ok {
			return invalid(field, mk.String(), "has no policy", "add a policy with the member's limits")
		}
		if j, dup := budgets[b]; dup {
			return invalid(field, mk.String(), "is charged to the budget of members["+strconv.Itoa(j)+"] ("+b.String()+")",
				"list each budget once: two members on one budget would let the pool run twice its limit")
		}
		budgets[b] = i
	}
	return nil
}

// Members returns the members of the pool k names, in order of preference,
// each with k's Tenant, and whether k names a pool.
func (ps Set) Members(k quota.Key) ([]quota.Key, bool) {
	members, ok := ps.byKey[k.WithoutTenant()]
	if !ok {
		return nil, false
	}
	out := make([]quota.Key, len(members))
	for i, m := range members {
		m.Tenant = k.Tenant
		out[i] = m
	}
	return out, true
}

// Keys returns every pool's key, sorted by String.
func (ps Set) Keys() []quota.Key {
	keys := make([]quota.Key, 0, len(ps.byKey))
	for k := range ps.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// Len returns how many pools ps holds.
func (ps Set) Len() int { return len(ps.byKey) }

// Admission is Admit's answer: the member the decision is of, with
// the call's tenant, and the decision. For quota.Granted and quota.Queued, the ticket
// is held on Member alone.
type Admission struct {
	Member quota.Key
	// Index is Member's place among the members given.
	Index    int
	Decision quota.Decision
}

// Admit reserves r on the member of members (a pool's, see
// Set.Members) that can run it soonest, asking each member's own key of s
// in turn from members[first] on, so that each Reserve is atomic on its
// member and the members' budgets may live apart (in different Redis
// Cluster slots). A member whose grant finds its start gates open (a Start
// no more than its Delay) takes the call at once and the rest are not
// asked. Otherwise the member whose grant
// starts soonest (quota.Decision.Start) or whose place in line matures soonest
// (quota.Decision.Wait) takes it, the earliest asked on a tie; every other grant
// or place taken on the way is given back (Cancel), so the call holds one.
// A member that cannot take the call is skipped: one paused (a provider's
// rate limit, a spend cap or daily quota closing it), whose daily window is
// spent, whose line is past its MaxWait, whose store is unavailable, or
// that the cost can never fit. When no member can take it, the answer is
// the skipped member's decision that says to come back soonest (a grant
// paused since keeps its place on that member), or, when no member could
// decide at all, the first member's error.
//
// Under the same ticket Admit is idempotent as Reserve is: a call
// queued on a member is granted there once its place matures unless
// another member can run it sooner, in which case the place is given back.
// Pass the member it is held on as first to ask that one before the rest.
//
// Errors: an *quota.InvalidError from the first member (the reservation is bad on
// any), or, when every member failed, the first member's error
// (ErrOversize, ErrNoPolicy, ErrUnavailable). When giving back an unused
// grant fails, so does Admit, with that Cancel's error, after giving
// back what else it held: the call then holds nothing (a place whose
// Cancel failed lapses on its own, see quota.Reservation.LeaseTTL).
func Admit(ctx context.Context, s quota.Store, members []quota.Key, r quota.Reservation, first int) (Admission, error) {
	if len(members) == 0 {
		return Admission{}, invalid("members", "", "is empty", "pass a pool's members (Set.Members)")
	}
	if first < 0 || first >= len(members) {
		first = 0
	}
	// best is the ready member chosen so far, fallback the skipped one
	// that says to come back soonest; each may hold the ticket.
	var best, fallback *Admission
	var firstErr error
	release := func(a *Admission) error {
		if a == nil || (a.Decision.Outcome != quota.Granted && a.Decision.Outcome != quota.Queued) {
			return nil
		}
		if err := s.Cancel(ctx, a.Member, r.Ticket); err != nil {
			return fmt.Errorf("pool: giving back a place on member %s: %w", a.Member, err)
		}
		return nil
	}
	// keep returns the better of held and a, giving back the other.
	keep := func(held, a *Admission, better bool) (*Admission, error) {
		if held == nil || better {
			return a, release(held)
		}
		return held, release(a)
	}
	for n := range members {
		i := (first + n) % len(members)
		rr := r
		rr.Key = members[i]
		d, err := s.Reserve(ctx, rr)
		if err != nil {
			if errors.Is(err, quota.ErrInvalid) {
				return Admission{}, errors.Join(err, release(best), release(fallback))
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		a := &Admission{Member: members[i], Index: i, Decision: d}
		if ready(d) {
			best, err = keep(best, a, best == nil || eta(d) < eta(best.Decision))
			if err != nil {
				return Admission{}, errors.Join(err, release(best), release(fallback))
			}
			if d.Outcome == quota.Granted && d.Start <= d.Delay {
				break
			}
			continue
		}
		fallback, err = keep(fallback, a, fallback == nil || d.Wait < fallback.Decision.Wait)
		if err != nil {
			return Admission{}, errors.Join(err, release(best), release(fallback))
		}
	}
	switch {
	case best != nil:
		if err := release(fallback); err != nil {
			return Admission{}, errors.Join(err, release(best))
		}
		return *best, nil
	case fallback != nil:
		return *fallback, nil
	}
	return Admission{}, firstErr
}

// ready reports whether a member's decision lets it run the call: a grant,
// or a place in line for capacity (not a pause).
func ready(d quota.Decision) bool {
	switch d.Outcome {
	case quota.Granted:
		return true
	case quota.Queued:
		return d.Reason != quota.Paused && d.Reason != quota.Unavailable
	}
	return false
}

// eta is how soon a ready member can start the call.
func eta(d quota.Decision) int64 {
	if d.Outcome == quota.Granted {
		return int64(d.Start)
	}
	return int64(d.Wait)
}
