package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Clock tells the store the time. nil means quota.SystemClock{}. A key
	// never decides at a time before one it has decided at: should the clock
	// step back, the key keeps its latest time until the clock passes it.
	Clock quota.Clock
}

// Store is a quota.Store held in memory. Build it with New; the zero Store is
// not usable. It is safe for concurrent use: each key has its own mutex, and
// the set of keys is fixed by the Policies given to New.
type Store struct {
	clock quota.Clock
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
	s := &Store{clock: opts.Clock, keys: make(map[quota.Key]*keyState)}
	for _, k := range ps.Keys() {
		_, p, _ := ps.Lookup(k)
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("memory: policy %s: %w", k, err)
		}
		s.keys[k] = newKeyState(k, p.WithDefaults())
	}
	return s, nil
}

// state returns the budget k is charged against: k's own, or for a key with a
// tenant and no policy of its own, the account-wide key's (as
// quota.Policies.Lookup resolves it). The map is never written after New, so
// reading it needs no lock.
func (s *Store) state(k quota.Key) (*keyState, error) {
	if ks, ok := s.keys[k]; ok {
		return ks, nil
	}
	if k.Tenant != "" {
		if ks, ok := s.keys[k.WithoutTenant()]; ok {
			return ks, nil
		}
	}
	return nil, quota.NoPolicyError(k)
}

// lookup validates k and returns its state.
func (s *Store) lookup(k quota.Key) (*keyState, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return s.state(k)
}

// Reserve charges r.Cost against every axis of r.Key under r.Ticket, all or
// nothing, as quota.Store documents. ctx is not used: the store never blocks
// on anything but the key's mutex.
func (s *Store) Reserve(_ context.Context, r quota.Reservation) (quota.Decision, error) {
	if err := r.Validate(); err != nil {
		return quota.Decision{}, err
	}
	ks, err := s.state(r.Key)
	if err != nil {
		return quota.Decision{}, err
	}
	now := ks.lock(s.clock)
	defer ks.mu.Unlock()
	return ks.reserve(now, r)
}

// Settle charges or refunds the difference between st.Actual and the
// estimate charged under st.Ticket, releases its lease and applies
// st.Observed, all under the key's mutex. It returns quota.ErrUnknownTicket
// (wrapped with the key and ticket) when the ticket is not held as granted;
// the observations are applied all the same.
func (s *Store) Settle(_ context.Context, st quota.Settlement) error {
	if err := st.Validate(); err != nil {
		return err
	}
	ks, err := s.lookup(st.Key)
	if err != nil {
		return err
	}
	now := ks.lock(s.clock)
	defer ks.mu.Unlock()
	settled := ks.settle(now, st.Ticket, st.Actual)
	ks.observe(now, st.Observed)
	ks.learn(now, st)
	if !settled {
		return fmt.Errorf("%w: %s ticket %q is not granted (never reserved, still queued, settled already or expired); settle only after Reserve granted it",
			quota.ErrUnknownTicket, st.Key, st.Ticket)
	}
	return nil
}

// Cancel refunds the cost charged under ticket and releases its lease.
// Unknown tickets are not an error; an empty one is an *quota.InvalidError.
func (s *Store) Cancel(_ context.Context, key quota.Key, ticket string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := quota.ValidateTicket(ticket); err != nil {
		return err
	}
	ks, err := s.state(key)
	if err != nil {
		return err
	}
	now := ks.lock(s.clock)
	defer ks.mu.Unlock()
	ks.cancel(now, ticket)
	return nil
}

// Pause refuses new tickets on key until until, with reason, extending (never
// shortening) a pause in force. An until not after now does nothing.
func (s *Store) Pause(_ context.Context, key quota.Key, until time.Time, reason string) error {
	ks, err := s.lookup(key)
	if err != nil {
		return err
	}
	now := ks.lock(s.clock)
	defer ks.mu.Unlock()
	ks.pause(now, until, reason)
	return nil
}

// Observe lowers key's levels to what the provider reported remains and, with
// Policy.AdoptObservedLimits, adopts the reported limits. An observation of an
// invalid axis is an *quota.InvalidError and nothing is changed.
func (s *Store) Observe(_ context.Context, key quota.Key, obs []quota.Observation) error {
	if err := quota.ValidateObservations(obs); err != nil {
		return err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return err
	}
	now := ks.lock(s.clock)
	defer ks.mu.Unlock()
	ks.observe(now, obs)
	return nil
}

// Snapshot reports the levels now of the budget key is charged against
// (Snapshot.Key names that budget: for a tenant without a policy of its own,
// the account-wide key).
func (s *Store) Snapshot(_ context.Context, key quota.Key) (quota.Snapshot, error) {
	ks, err := s.lookup(key)
	if err != nil {
		return quota.Snapshot{}, err
	}
	now := ks.lock(s.clock)
	defer ks.mu.Unlock()
	return ks.snapshot(now), nil
}
