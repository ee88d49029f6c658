package interceptor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// A store failing under a test (an error that is none of the answers the
// interceptor acts on: say, a script its Redis cannot run) ends each
// attempt with a retryable StoreUnavailable, which Temporal retries until
// the workflow times out, minutes later. A watched store ends the test's
// waits at its first such error instead, and the test fails with it.

// watchedStore passes every call to Store and reports to its env the
// errors that mean the store failed.
type watchedStore struct {
	quota.Store
	e *env
}

// watch returns s watched for failures (see storeFailed): the first ends
// every wait from waitCtx and fails the test.
func (e *env) watch(s quota.Store) quota.Store {
	if _, ok := s.(*watchedStore); ok {
		return s
	}
	return &watchedStore{Store: s, e: e}
}

func (s *watchedStore) check(op string, err error) {
	if storeFailed(err) {
		s.e.breakStore(fmt.Errorf("the test's store failed (%s): %w", op, err))
	}
}

func (s *watchedStore) Reserve(ctx context.Context, r quota.Reservation) (quota.Decision, error) {
	d, err := s.Store.Reserve(ctx, r)
	s.check("Reserve", err)
	return d, err
}

func (s *watchedStore) Settle(ctx context.Context, st quota.Settlement) error {
	err := s.Store.Settle(ctx, st)
	s.check("Settle", err)
	return err
}

func (s *watchedStore) Cancel(ctx context.Context, key quota.Key, ticket string) error {
	err := s.Store.Cancel(ctx, key, ticket)
	s.check("Cancel", err)
	return err
}

func (s *watchedStore) Renew(ctx context.Context, key quota.Key, ticket string, ttl time.Duration) (time.Duration, error) {
	d, err := s.Store.Renew(ctx, key, ticket, ttl)
	s.check("Renew", err)
	return d, err
}

func (s *watchedStore) Pause(ctx context.Context, key quota.Key, d time.Duration, reason quota.PauseReason) error {
	err := s.Store.Pause(ctx, key, d, reason)
	s.check("Pause", err)
	return err
}

func (s *watchedStore) Observe(ctx context.Context, key quota.Key, obs []quota.Observation) error {
	err := s.Store.Observe(ctx, key, obs)
	s.check("Observe", err)
	return err
}

func (s *watchedStore) Snapshot(ctx context.Context, key quota.Key) (quota.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, key)
	s.check("Snapshot", err)
	return snap, err
}

// storeFailed reports whether err, from a store, means the store failed:
// not an answer the interceptor acts on (no policy, a cost too large or
// invalid, a ticket gone), not the caller's own cancellation, and not a
// server out of reach for now, which retries ride out and outage tests
// cause on purpose.
func storeFailed(err error) bool {
	for _, ok := range []error{context.Canceled, context.DeadlineExceeded, quota.ErrUnavailable,
		quota.ErrNoPolicy, quota.ErrOversize, quota.ErrInvalid, quota.ErrUnknownTicket} {
		if errors.Is(err, ok) {
			return false
		}
	}
	return err != nil
}

// waitSlack is what waitCtx leaves before the test binary's deadline, for
// the test to report its failure before the binary panics.
const waitSlack = 10 * time.Second

// waitCtx returns a context for waiting on the test's workflows for at most
// d: it ends early when a watched store fails (context.Cause says how), and
// before the test binary's deadline, so a wait that cannot end fails its
// own test instead of timing out the whole package.
func (e *env) waitCtx(d time.Duration) (context.Context, context.CancelFunc) {
	if deadline, ok := e.t.Deadline(); ok {
		d = min(d, time.Until(deadline)-waitSlack)
	}
	return context.WithTimeoutCause(e.broken, d, fmt.Errorf("no result within %s", d))
}

// waited returns err, or why ctx ended when it did: the store's failure or
// the wait's bound, which say more than the SDK's "context canceled".
func waited(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (waiting: %v)", context.Cause(ctx), err)
	}
	return err
}

// redisStore starts a Redis for the test and returns a Store of ps on it,
// having read every key once: a store that cannot serve (a script its Redis
// cannot run) fails the test at once, not when a wait for it gives up.
func redisStore(t *testing.T, ps quota.Policies) *redis.Store {
	t.Helper()
	s, err := redis.New(redistest.Start(t), ps, redis.Options{})
	require.NoError(t, err)
	for _, k := range ps.Keys() {
		_, err := s.Snapshot(context.Background(), k)
		require.NoError(t, err, "the store cannot serve %s", k)
	}
	return s
}

// failingStore is a store whose Reserve fails as a script Redis cannot run
// does.
type failingStore struct {
	quota.Store
	err error
}

func (s failingStore) Reserve(context.Context, quota.Reservation) (quota.Decision, error) {
	return quota.Decision{}, s.err
}

// A store failing under a test's workflows ends the test's wait at its
// first failure, with that failure, not at the workflows' timeout.
func TestWatchedStoreEndsTheWaitAtItsFirstFailure(t *testing.T) {
	e := newEnv(t, burstSim("gpt-watched"))
	store := memoryStore(t, map[quota.Key]quota.Policy{openaiKey("gpt-watched"): generous()})
	e.startWorker(interceptor.Options{Store: failingStore{Store: store, err: errors.New("ERR Error compiling script")}})
	_, err := e.result(e.start("watched", agent("gpt-watched")))
	require.ErrorContains(t, err, "the test's store failed (Reserve): ERR Error compiling script")
	require.NotContains(t, err.Error(), "timeout", "the wait ended at the failure")
	e.forgive() // the failure was the point
}
