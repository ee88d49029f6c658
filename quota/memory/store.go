package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Clock tells the store the time. nil means quota.SystemClock{}. A key
	// never decides at a time before one it has decided at: should the clock
	// step back, the key keeps its latest time until the clock passes it.
	Clock quota.Clock
}

// Store is a quota.Store held in memory. Build it with New; the zero Store is
// not usable. It is safe for concurrent use: each account's budget, with the
// budgets of the tenants nested in it, has its own mutex, and the set of
// budgets is fixed by the Policies given to New.
type Store struct {
	clock quota.Clock
	ps    quota.Policies
	keys  map[quota.Key]*keyState
}

var _ quota.Store = (*Store)(nil)

// New returns a Store governing the keys of ps, every level full. It returns
// an *quota.InvalidError if a policy in ps does not validate (which cannot
// happen for Policies built by quota.NewPolicies).
func New(ps quota.Policies, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = quota.SystemClock{}
	}
	s := &Store{clock: opts.Clock, ps: ps, keys: make(map[quota.Key]*keyState)}
	for _, k := range ps.Keys() {
		_, p, _ := ps.Lookup(k)
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("memory: policy %s: %w", k, err)
		}
		s.keys[k] = newKeyState(k, p.WithDefaults())
	}
	// A tenant's budget joins its account's tree when the account has a
	// budget; every other budget is the root of a tree of its own.
	for k, ks := range s.keys {
		if _, _, ok := ps.Account(k); !ok {
			ks.tree = &tree{root: ks}
		}
	}
	for k, ks := range s.keys {
		if a, _, ok := ps.Account(k); ok {
			ks.tree = s.keys[a].tree
		}
	}
	return s, nil
}

// scope returns what a call on k is charged to: the budget
// quota.Policies.Lookup resolves k to and, for a tenant's budget nested in
// its account's, the account's too. The map is never written after New, so
// reading it needs no lock.
func (s *Store) scope(k quota.Key) (scope, error) {
	b, _, ok := s.ps.Lookup(k)
	if !ok {
		return scope{}, storekit.NoPolicyError(k)
	}
	ks := s.keys[b]
	if ks.tree.root != ks {
		return scope{own: ks, root: ks.tree.root, tenant: k.Tenant}, nil
	}
	return scope{root: ks, tenant: k.Tenant}, nil
}

// lookup validates k and returns its scope.
func (s *Store) lookup(k quota.Key) (scope, error) {
	if err := k.Validate(); err != nil {
		return scope{}, err
	}
	return s.scope(k)
}

// Reserve charges r.Cost against every axis of r.Key under r.Ticket, all or
// nothing, as quota.Store documents. ctx is not used: the store never blocks
// on anything but the account's mutex.
func (s *Store) Reserve(_ context.Context, r quota.Reservation) (quota.Decision, error) {
	if err := r.Validate(); err != nil {
		return quota.Decision{}, err
	}
	sc, err := s.scope(r.Key)
	if err != nil {
		return quota.Decision{}, err
	}
	if err := sc.validateSpend(r.Cost); err != nil {
		return quota.Decision{}, err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	return tr.reserve(now, sc, r, s.ps.Weight(r.Key))
}

// Settle charges or refunds the difference between st.Actual and the
// estimate charged under st.Ticket, releases its leases and applies
// st.Observed, all under the account's mutex. It returns
// quota.ErrUnknownTicket (wrapped with the key and ticket) when the ticket
// is not held as granted; the observations are applied all the same, and a
// ticket no longer held is charged what st.Actual exceeds st.Charged by (see
// quota.Store).
func (s *Store) Settle(_ context.Context, st quota.Settlement) error {
	if err := st.Validate(); err != nil {
		return err
	}
	sc, err := s.lookup(st.Key)
	if err != nil {
		return err
	}
	if err := sc.validateSpend(st.Actual); err != nil {
		return err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	settled, err := tr.settle(now, sc, st)
	if err != nil {
		return err
	}
	sc.root.observe(now, st.Observed)
	sc.root.learn(now, st)
	sc.root.gain(now, st)
	if !settled {
		return fmt.Errorf("%w: %s ticket %q is not granted (never reserved, still queued, settled already or expired); settle only after Reserve granted it",
			quota.ErrUnknownTicket, st.Key, st.Ticket)
	}
	return nil
}

// Cancel refunds the cost charged under ticket and releases its leases.
// Unknown tickets are not an error; an empty one is an *quota.InvalidError.
func (s *Store) Cancel(_ context.Context, key quota.Key, ticket string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.ValidateTicket(ticket); err != nil {
		return err
	}
	sc, err := s.scope(key)
	if err != nil {
		return err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	return tr.cancel(now, sc, key, ticket)
}

// Renew extends the grant held under ticket, and its leases, to lapse ttl
// from now (at most the policy's LeaseTTL, which 0 means) and returns how
// long it now has left. It returns quota.ErrUnknownTicket (wrapped) when the
// ticket is not held as granted.
func (s *Store) Renew(_ context.Context, key quota.Key, ticket string, ttl time.Duration) (time.Duration, error) {
	if err := storekit.ValidateRenewal(ticket, ttl); err != nil {
		return 0, err
	}
	sc, err := s.lookup(key)
	if err != nil {
		return 0, err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	left, ok, err := tr.renewal(now, sc, key, ticket, ttl)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: %s ticket %q is not granted (never reserved, still queued, settled already or expired); renew only a grant not yet settled",
			quota.ErrUnknownTicket, key, ticket)
	}
	return left, nil
}

// Pause refuses new tickets on key's budget for d from now, with reason,
// extending (never shortening) a pause in force; an account's pause stops
// the tenants nested in it too. A d of zero or less does nothing.
func (s *Store) Pause(_ context.Context, key quota.Key, d time.Duration, reason quota.PauseReason) error {
	if err := reason.Validate(); err != nil {
		return err
	}
	sc, err := s.lookup(key)
	if err != nil {
		return err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	if d > 0 {
		sc.root.lesson(now, reason)
	}
	sc.target().pause(now, d, reason)
	return nil
}

// Observe lowers the levels of key's budget to what the provider reported
// remains and, with Policy.AdoptObservedLimits, adopts the reported limits.
// An observation of an invalid axis is an *quota.InvalidError and nothing
// is changed.
func (s *Store) Observe(_ context.Context, key quota.Key, obs []quota.Observation) error {
	if err := storekit.ValidateObservations(obs); err != nil {
		return err
	}
	sc, err := s.lookup(key)
	if err != nil {
		return err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	sc.target().observe(now, obs)
	return nil
}

// Snapshot reports the levels now of the budget key is charged against
// first (Snapshot.Key names that budget: for a tenant without a policy of
// its own, the account-wide key), after letting expired tickets lapse as
// any other call would.
func (s *Store) Snapshot(_ context.Context, key quota.Key) (quota.Snapshot, error) {
	sc, err := s.lookup(key)
	if err != nil {
		return quota.Snapshot{}, err
	}
	tr := sc.root.tree
	now := tr.lock(s.clock)
	defer tr.mu.Unlock()
	tr.sweep(now)
	snap := sc.target().snapshot(now)
	snap.EstimateRatio = sc.root.estimateRatio(now)
	snap.Margin = sc.root.margin()
	if sc.target() == sc.root {
		sc.root.axisMargins(&snap)
	}
	snap.Line = tr.tenants(sc.tenant, sc.own == nil)
	return snap, nil
}
