package failover

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/storekit"
)

// Defaults for Options' zero fields.
const (
	// DefaultRetry is the wait a Closed store tells refused callers.
	DefaultRetry = time.Second
	// DefaultCooldown is how long the primary is skipped after it fails.
	DefaultCooldown = time.Second
)

// Options configure a Store. Zero fields take the documented defaults.
type Options struct {
	// Mode is what to do while the primary is unreachable. Default Closed.
	Mode Mode
	// Retry is the Wait of a Closed refusal. Default DefaultRetry.
	Retry time.Duration
	// LocalShare is, for Local, the fraction in (0, 1] of every limit's
	// capacity this replica may use on its own, e.g. 1/replicas. Default 1.
	LocalShare float64
	// Cooldown is how long the primary is skipped after a failure before one
	// call probes it again. Default DefaultCooldown.
	Cooldown time.Duration
	// Clock times the cooldown and runs the Local store. nil means
	// quota.SystemClock{}.
	Clock quota.Clock
	// OnStateChange, when set, is called as the store turns degraded (with
	// the primary's error) and recovers (with nil), for logs and metrics. It
	// is called without locks held, from the goroutine whose call changed
	// the state; it must not block.
	OnStateChange func(degraded bool, err error)
}

// Store is a quota.Store that passes calls to a primary and falls back to
// its Mode while the primary is unreachable. Build it with New; it is safe
// for concurrent use.
//
// While degraded: Reserve follows the Mode; Settle, Cancel and Renew of
// tickets the fallback admitted stay with the fallback (also after
// recovery, and also once settled or cancelled under Local, so that the
// Local store answers for them), while those of primary tickets fail with
// quota.ErrUnavailable: a ticket the fallback does not know may be one the
// unreachable primary holds. Bad input and keys without a policy fail as
// they would on the primary. Pause and Observe reach the Local store, and are dropped (nil) by Closed and Open,
// which have nothing to apply them to; Snapshot reads the Local store, and
// fails with quota.ErrUnavailable in the other modes.
type Store struct {
	primary  quota.Store
	local    *memory.Store // Local only
	ps       quota.Policies
	mode     Mode
	retry    time.Duration
	cooldown time.Duration
	clock    quota.Clock
	onChange func(bool, error)

	mu       sync.Mutex
	degraded bool
	probing  bool      // one call is trying the primary
	retryAt  time.Time // skip the primary until then
	lastErr  error
	routes   map[route]routed // tickets the fallback admitted
	sweepAt  int              // len(routes) at which to drop expired routes
}

var _ quota.Store = (*Store)(nil)

// route names a ticket the fallback holds: in its account's namespace, as
// every store keeps tickets, so that the Local store can refuse the ticket
// under another tenant's key.
type route struct {
	account quota.Key
	ticket  string
}

func routeOf(k quota.Key, ticket string) route { return route{k.WithoutTenant(), ticket} }

// routed says where a fallback ticket lives and until when it matters.
type routed struct {
	local   bool // false: admitted open, recorded nowhere
	expires time.Time
}

// New returns a Store over primary for the keys of ps. It returns an
// *quota.InvalidError naming the bad option, or an error if the Local
// store's scaled policies are invalid.
func New(primary quota.Store, ps quota.Policies, opts Options) (*Store, error) {
	if primary == nil {
		return nil, &quota.InvalidError{Field: "failover.primary", Value: "nil", Problem: "is missing",
			Fix: "pass the shared store, e.g. a quota/redis Store"}
	}
	if opts.Mode == 0 {
		opts.Mode = Closed
	}
	if opts.Mode > Local {
		return nil, &quota.InvalidError{Field: "failover.mode", Value: opts.Mode.String(), Problem: "is not a known mode",
			Fix: "use failover.Closed, Open or Local (or ParseMode)"}
	}
	if opts.Retry < 0 {
		return nil, &quota.InvalidError{Field: "failover.retry", Value: opts.Retry.String(), Problem: "is negative",
			Fix: "use 0 for the default (1s) or a positive duration"}
	}
	if opts.Retry == 0 {
		opts.Retry = DefaultRetry
	}
	if opts.Cooldown < 0 {
		return nil, &quota.InvalidError{Field: "failover.cooldown", Value: opts.Cooldown.String(), Problem: "is negative",
			Fix: "use 0 for the default (1s) or a positive duration"}
	}
	if opts.Cooldown == 0 {
		opts.Cooldown = DefaultCooldown
	}
	if opts.LocalShare == 0 {
		opts.LocalShare = 1
	}
	if !(opts.LocalShare > 0 && opts.LocalShare <= 1) { // also rejects NaN
		return nil, &quota.InvalidError{Field: "failover.local_share",
			Value: strconv.FormatFloat(opts.LocalShare, 'g', -1, 64), Problem: "must be in (0, 1]",
			Fix: "use this replica's share of the fleet, e.g. 0.25 for four replicas"}
	}
	if opts.Clock == nil {
		opts.Clock = quota.SystemClock{}
	}
	s := &Store{
		primary: primary, ps: ps, mode: opts.Mode, retry: opts.Retry, cooldown: opts.Cooldown,
		clock: opts.Clock, onChange: opts.OnStateChange, routes: make(map[route]routed), sweepAt: 1024,
	}
	if opts.Mode == Local {
		local, err := localPolicies(ps, opts.LocalShare)
		if err != nil {
			return nil, err
		}
		if s.local, err = memory.New(local, memory.Options{Clock: opts.Clock}); err != nil {
			return nil, fmt.Errorf("failover: local store: %w", err)
		}
	}
	return s, nil
}

// localPolicies returns ps with every limit's capacity multiplied by share,
// rounded down but never below what leaves one unit after headroom.
func localPolicies(ps quota.Policies, share float64) (quota.Policies, error) {
	m := make(map[quota.Key]quota.Policy)
	for _, k := range ps.Keys() {
		_, p, _ := ps.Lookup(k)
		limits := make([]quota.Limit, len(p.Limits))
		for i, l := range p.Limits {
			c := max(int64(math.Floor(float64(l.Capacity)*share)), 1)
			for p.Effective(c) < 1 {
				c++
			}
			l.Capacity = c
			limits[i] = l
		}
		p.Limits = limits
		m[k] = p
	}
	local, err := quota.NewPolicies(m)
	if err != nil {
		return quota.Policies{}, fmt.Errorf("failover: local share of the policies: %w", err)
	}
	return local, nil
}

// Mode returns the store's failure mode.
func (s *Store) Mode() Mode { return s.mode }

// Degraded reports whether the primary is currently considered unreachable.
func (s *Store) Degraded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.degraded
}

// Reserve implements quota.Store: the primary decides unless it is
// unreachable, in which case the Mode does. A ticket the fallback admitted
// stays with the fallback.
func (s *Store) Reserve(ctx context.Context, r quota.Reservation) (quota.Decision, error) {
	if rt, ok := s.route(r.Key, r.Ticket); ok {
		if !rt.local {
			return s.openGrant(r), nil
		}
		return s.local.Reserve(ctx, r)
	}
	if probe, ok := s.acquire(); ok {
		d, err := s.primary.Reserve(ctx, r)
		if s.release(ctx, probe, err) == nil {
			return d, err
		}
	}
	if err := r.Validate(); err != nil {
		return quota.Decision{}, err
	}
	if _, _, ok := s.ps.Lookup(r.Key); !ok {
		return quota.Decision{}, storekit.NoPolicyError(r.Key)
	}
	switch s.mode {
	case Open:
		if r.Place {
			// A place is ready at once; its call is admitted when it comes.
			return quota.Decision{Outcome: quota.Queued}, nil
		}
		s.remember(r.Key, r.Ticket, false)
		return s.openGrant(r), nil
	case Local:
		d, err := s.local.Reserve(ctx, r)
		if err == nil && d.Outcome != quota.Refused {
			s.remember(r.Key, r.Ticket, true)
		}
		return d, err
	}
	return quota.Decision{Outcome: quota.Refused, Reason: quota.Unavailable, Wait: s.retry}, nil
}

// openGrant is Open's grant of r, recorded nowhere: it lives as long as r
// asks (its renewals succeed while the route is remembered).
func (s *Store) openGrant(r quota.Reservation) quota.Decision {
	_, p, _ := s.ps.Lookup(r.Key)
	return quota.Decision{Outcome: quota.Granted, GrantLeft: storekit.LeaseTTL(p.LeaseTTL, r.LeaseTTL)}
}

// Settle implements quota.Store. A ticket the fallback admitted settles
// there (under Open there is nothing to settle) and its observations go
// where Observe sends them; a primary ticket settles on the primary, and
// while the primary is unreachable its observations reach the Local store.
func (s *Store) Settle(ctx context.Context, st quota.Settlement) error {
	if err := st.Validate(); err != nil {
		return err
	}
	if err := s.lookup(st.Key); err != nil {
		return err
	}
	if rt, ok := s.route(st.Key, st.Ticket); ok {
		if !rt.local {
			s.forget(st.Key, st.Ticket)
			if len(st.Observed) > 0 {
				return s.Observe(ctx, s.metered(st.Key), st.Observed)
			}
			return nil
		}
		err := s.local.Settle(ctx, st)
		if len(st.Observed) > 0 {
			err = errors.Join(err, s.observePrimary(ctx, s.metered(st.Key), st.Observed))
		}
		return err
	}
	err := s.toPrimary(ctx, "settle", func() error { return s.primary.Settle(ctx, st) })
	if errors.Is(err, quota.ErrUnavailable) && s.mode == Local && len(st.Observed) > 0 {
		err = errors.Join(err, s.local.Observe(ctx, st.Key, st.Observed))
	}
	return err
}

// Cancel implements quota.Store.
func (s *Store) Cancel(ctx context.Context, key quota.Key, ticket string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.ValidateTicket(ticket); err != nil {
		return err
	}
	if err := s.lookup(key); err != nil {
		return err
	}
	if rt, ok := s.route(key, ticket); ok {
		if !rt.local {
			s.forget(key, ticket)
			return nil
		}
		return s.local.Cancel(ctx, key, ticket)
	}
	return s.toPrimary(ctx, "cancel", func() error { return s.primary.Cancel(ctx, key, ticket) })
}

// Renew implements quota.Store. A ticket the fallback admitted renews
// there (under Open it is renewed by being remembered longer); a primary
// ticket renews on the primary, and fails with quota.ErrUnavailable while
// the primary is unreachable.
func (s *Store) Renew(ctx context.Context, key quota.Key, ticket string, ttl time.Duration) (time.Duration, error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	if err := storekit.ValidateRenewal(ticket, ttl); err != nil {
		return 0, err
	}
	if err := s.lookup(key); err != nil {
		return 0, err
	}
	if rt, ok := s.route(key, ticket); ok {
		s.remember(key, ticket, rt.local)
		if !rt.local {
			_, p, _ := s.ps.Lookup(key)
			return storekit.LeaseTTL(p.LeaseTTL, ttl), nil
		}
		return s.local.Renew(ctx, key, ticket, ttl)
	}
	var left time.Duration
	err := s.toPrimary(ctx, "renew", func() error {
		var err error
		left, err = s.primary.Renew(ctx, key, ticket, ttl)
		return err
	})
	return left, err
}

// Pause implements quota.Store. While degraded the Local store is paused
// instead; Closed and Open drop the pause.
func (s *Store) Pause(ctx context.Context, key quota.Key, d time.Duration, reason quota.PauseReason) error {
	return s.toEither(ctx, func() error { return s.primary.Pause(ctx, key, d, reason) },
		func() error { return s.local.Pause(ctx, key, d, reason) })
}

// Observe implements quota.Store. While degraded the Local store observes
// instead; Closed and Open drop the observation.
func (s *Store) Observe(ctx context.Context, key quota.Key, obs []quota.Observation) error {
	return s.toEither(ctx, func() error { return s.primary.Observe(ctx, key, obs) },
		func() error { return s.local.Observe(ctx, key, obs) })
}

// Snapshot implements quota.Store. While degraded it reads the Local store,
// or fails with quota.ErrUnavailable in the other modes.
func (s *Store) Snapshot(ctx context.Context, key quota.Key) (quota.Snapshot, error) {
	var snap quota.Snapshot
	err := s.toPrimary(ctx, "snapshot", func() error {
		var err error
		snap, err = s.primary.Snapshot(ctx, key)
		return err
	})
	if errors.Is(err, quota.ErrUnavailable) && s.mode == Local {
		return s.local.Snapshot(ctx, key)
	}
	return snap, err
}

// observePrimary gives obs to the primary if the breaker allows, and drops
// them otherwise: for a Local ticket's settlement, which the Local store
// has applied already.
func (s *Store) observePrimary(ctx context.Context, key quota.Key, obs []quota.Observation) error {
	if probe, ok := s.acquire(); ok {
		err := s.primary.Observe(ctx, key, obs)
		if s.release(ctx, probe, err) == nil {
			return err
		}
	}
	return nil
}

// metered returns the key whose budget a settlement's observations lower:
// a tenant's account when it has a policy, else the key itself (see
// quota.Store.Settle).
func (s *Store) metered(k quota.Key) quota.Key {
	if account, _, ok := s.ps.Account(k); ok {
		return account
	}
	return k
}

// lookup returns storekit.NoPolicyError for a key without a policy, as every
// store does, whether or not the primary answers.
func (s *Store) lookup(k quota.Key) error {
	if _, _, ok := s.ps.Lookup(k); !ok {
		return storekit.NoPolicyError(k)
	}
	return nil
}

// toPrimary runs call against the primary if the breaker allows, else fails
// with quota.ErrUnavailable at once.
func (s *Store) toPrimary(ctx context.Context, op string, call func() error) error {
	probe, ok := s.acquire()
	if !ok {
		return fmt.Errorf("failover: %s: %w: primary skipped while degraded (last error: %v)", op, quota.ErrUnavailable, s.lastError())
	}
	err := call()
	s.release(ctx, probe, err)
	return err
}

// toEither runs primary if the breaker allows and it answers, else the
// fallback's version (Local) or nothing (Closed, Open).
func (s *Store) toEither(ctx context.Context, primary, local func() error) error {
	if probe, ok := s.acquire(); ok {
		err := primary()
		if s.release(ctx, probe, err) == nil {
			return err
		}
	}
	if s.mode == Local {
		return local()
	}
	return nil
}

// acquire reports whether a call may go to the primary: always while
// healthy; while degraded, one call (the probe) once the cooldown is over.
func (s *Store) acquire() (probe, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.degraded {
		return false, true
	}
	if s.probing || s.clock.Now().Before(s.retryAt) {
		return false, false
	}
	s.probing = true
	return true, true
}

// release records a primary call's result and returns err if it means the
// primary is unreachable (nil otherwise): that opens the breaker for a
// cooldown, and success closes it. A call cut short by its own context says
// nothing about the primary.
func (s *Store) release(ctx context.Context, probe bool, err error) error {
	down := err != nil && errors.Is(err, quota.ErrUnavailable) && ctx.Err() == nil
	s.mu.Lock()
	if probe {
		s.probing = false
	}
	changed := false
	switch {
	case down:
		changed = !s.degraded
		s.degraded, s.lastErr = true, err
		s.retryAt = s.clock.Now().Add(s.cooldown)
	case err != nil && ctx.Err() != nil:
		// Neither up nor down: the caller gave up.
	default:
		changed = s.degraded
		s.degraded, s.lastErr = false, nil
	}
	s.mu.Unlock()
	if changed && s.onChange != nil {
		s.onChange(down, errOrNil(down, err))
	}
	if down {
		return err
	}
	return nil
}

func errOrNil(keep bool, err error) error {
	if keep {
		return err
	}
	return nil
}

func (s *Store) lastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

func (s *Store) route(k quota.Key, ticket string) (routed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.routes[routeOf(k, ticket)]
	if ok && !s.clock.Now().Before(rt.expires) {
		delete(s.routes, routeOf(k, ticket))
		return routed{}, false
	}
	return rt, ok
}

// remember records that the fallback holds a ticket, for as long as any
// store would: its longest wait plus its lease.
func (s *Store) remember(k quota.Key, ticket string, local bool) {
	_, p, _ := s.ps.Lookup(k)
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[routeOf(k, ticket)] = routed{local: local, expires: now.Add(p.MaxWait + p.LeaseTTL)}
	if len(s.routes) >= s.sweepAt {
		for r, rt := range s.routes {
			if !now.Before(rt.expires) {
				delete(s.routes, r)
			}
		}
		s.sweepAt = max(1024, 2*len(s.routes))
	}
}

func (s *Store) forget(k quota.Key, ticket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.routes, routeOf(k, ticket))
}
