package quota

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Pools names the keys served by several members: deployments or accounts
// (Azure regions, OpenAI projects, Anthropic workspaces) each with its own
// key, endpoint and limits, which serve one model. A call on a pool's key
// runs on one member, admitted where it can run soonest (AdmitPool). Build
// it with NewPools; the zero value holds none. It is read-only and safe for
// concurrent use.
type Pools struct {
	byKey map[Key][]Key
}

// NewPools validates m, pool keys to their members in order of preference,
// against ps and returns the set. A pool's key is account-wide (no Tenant)
// and has no policy of its own (its members' budgets are what is charged);
// it has at least one member. Each member is an account-wide key of the
// pool's provider with a policy in ps, is no pool itself, and is charged to
// a budget no other member of the pool is charged to (Policies.Lookup), so
// that no budget counts a call twice. Errors are *InvalidError, wrapped
// with the pool's key.
func NewPools(ps Policies, m map[Key][]Key) (Pools, error) {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	byKey := make(map[Key][]Key, len(m))
	for _, k := range keys {
		if err := validPool(ps, m, k, m[k]); err != nil {
			return Pools{}, fmt.Errorf("pool %s: %w", k, err)
		}
		byKey[k] = append([]Key(nil), m[k]...)
	}
	return Pools{byKey: byKey}, nil
}

func validPool(ps Policies, m map[Key][]Key, k Key, members []Key) error {
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
	budgets := make(map[Key]int, len(members))
	for i, mk := range members {
		field := "members[" + strconv.Itoa(i) + "]"
		if err := mk.Validate(); err != nil {
			var inv *InvalidError
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
func (ps Pools) Members(k Key) ([]Key, bool) {
	members, ok := ps.byKey[k.WithoutTenant()]
	if !ok {
		return nil, false
	}
	out := make([]Key, len(members))
	for i, m := range members {
		m.Tenant = k.Tenant
		out[i] = m
	}
	return out, true
}

// Keys returns every pool's key, sorted by String.
func (ps Pools) Keys() []Key {
	keys := make([]Key, 0, len(ps.byKey))
	for k := range ps.byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// Len returns how many pools ps holds.
func (ps Pools) Len() int { return len(ps.byKey) }

// PoolAdmission is AdmitPool's answer: the member the decision is of, with
// the call's tenant, and the decision. For Granted and Queued, the ticket
// is held on Member alone.
type PoolAdmission struct {
	Member Key
	// Index is Member's place among the members given.
	Index    int
	Decision Decision
}

// AdmitPool reserves r on the member of members (a pool's, see
// Pools.Members) that can run it soonest, asking each member's own key of s
// in turn from members[first] on, so that each Reserve is atomic on its
// member and the members' budgets may live apart (in different Redis
// Cluster slots). A member that grants with no start delay takes the call
// at once and the rest are not asked. Otherwise the member whose grant
// starts soonest (Decision.Start) or whose place in line matures soonest
// (Decision.Wait) takes it, the earliest asked on a tie; every other grant
// or place taken on the way is given back (Cancel), so the call holds one.
// A member that cannot take the call is skipped: one paused (a provider's
// rate limit, a spend cap or daily quota closing it), whose daily window is
// spent, whose line is past its MaxWait, whose store is unavailable, or
// that the cost can never fit. When no member can take it, the answer is
// the skipped member's decision that says to come back soonest (a grant
// paused since keeps its place on that member), or, when no member could
// decide at all, the first member's error.
//
// Under the same ticket AdmitPool is idempotent as Reserve is: a call
// queued on a member is granted there once its place matures unless
// another member can run it sooner, in which case the place is given back.
// Pass the member it is held on as first to ask that one before the rest.
//
// Errors: an *InvalidError from the first member (the reservation is bad on
// any), or, when every member failed, the first member's error
// (ErrOversize, ErrNoPolicy, ErrUnavailable). When giving back an unused
// grant fails, so does AdmitPool, with that Cancel's error, after giving
// back what else it held: the call then holds nothing (a place whose
// Cancel failed lapses on its own, see Reservation.LeaseTTL).
func AdmitPool(ctx context.Context, s Store, members []Key, r Reservation, first int) (PoolAdmission, error) {
	if len(members) == 0 {
		return PoolAdmission{}, invalid("members", "", "is empty", "pass a pool's members (Pools.Members)")
	}
	if first < 0 || first >= len(members) {
		first = 0
	}
	// best is the ready member chosen so far, fallback the skipped one
	// that says to come back soonest; each may hold the ticket.
	var best, fallback *PoolAdmission
	var firstErr error
	release := func(a *PoolAdmission) error {
		if a == nil || (a.Decision.Outcome != Granted && a.Decision.Outcome != Queued) {
			return nil
		}
		if err := s.Cancel(ctx, a.Member, r.Ticket); err != nil {
			return fmt.Errorf("quota: giving back a place on pool member %s: %w", a.Member, err)
		}
		return nil
	}
	// keep returns the better of held and a, giving back the other.
	keep := func(held, a *PoolAdmission, better bool) (*PoolAdmission, error) {
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
			if errors.Is(err, ErrInvalid) {
				return PoolAdmission{}, errors.Join(err, release(best), release(fallback))
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		a := &PoolAdmission{Member: members[i], Index: i, Decision: d}
		if ready(d) {
			best, err = keep(best, a, best == nil || eta(d) < eta(best.Decision))
			if err != nil {
				return PoolAdmission{}, errors.Join(err, release(best), release(fallback))
			}
			if d.Outcome == Granted && d.Start == 0 {
				break
			}
			continue
		}
		fallback, err = keep(fallback, a, fallback == nil || d.Wait < fallback.Decision.Wait)
		if err != nil {
			return PoolAdmission{}, errors.Join(err, release(best), release(fallback))
		}
	}
	switch {
	case best != nil:
		if err := release(fallback); err != nil {
			return PoolAdmission{}, errors.Join(err, release(best))
		}
		return *best, nil
	case fallback != nil:
		return *fallback, nil
	}
	return PoolAdmission{}, firstErr
}

// ready reports whether a member's decision lets it run the call: a grant,
// or a place in line for capacity (not a pause).
func ready(d Decision) bool {
	switch d.Outcome {
	case Granted:
		return true
	case Queued:
		return d.Reason != Paused && d.Reason != Unavailable
	}
	return false
}

// eta is how soon a ready member can start the call.
func eta(d Decision) int64 {
	if d.Outcome == Granted {
		return int64(d.Start)
	}
	return int64(d.Wait)
}
