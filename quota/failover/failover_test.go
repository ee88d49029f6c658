package failover_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/failover"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

var gpt4o = quota.Key{Provider: "openai", Model: "gpt-4o"}

func policies(t *testing.T) quota.Policies {
	t.Helper()
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		gpt4o: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10).WithBurst(time.Minute)}, MaxWait: time.Second},
	})
	require.NoError(t, err)
	return ps
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   string
		want failover.Mode
	}{{"closed", failover.Closed}, {"open", failover.Open}, {"local", failover.Local}, {" Local ", failover.Local}}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := failover.ParseMode(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, got, must(failover.ParseMode(got.String())))
		})
	}
	_, err := failover.ParseMode("half-open")
	require.ErrorIs(t, err, quota.ErrInvalid)
	require.ErrorContains(t, err, "failover.mode")
	require.ErrorContains(t, err, "closed")
}

func must(m failover.Mode, err error) failover.Mode {
	if err != nil {
		panic(err)
	}
	return m
}

func TestNewValidatesOptions(t *testing.T) {
	ps := policies(t)
	primary := &fakeStore{}
	tests := []struct {
		name    string
		primary quota.Store
		opts    failover.Options
		field   string
	}{
		{"no primary", nil, failover.Options{}, "failover.primary"},
		{"unknown mode", primary, failover.Options{Mode: 9}, "failover.mode"},
		{"negative share", primary, failover.Options{Mode: failover.Local, LocalShare: -0.5}, "failover.local_share"},
		{"share above one", primary, failover.Options{Mode: failover.Local, LocalShare: 1.5}, "failover.local_share"},
		{"negative retry", primary, failover.Options{Retry: -time.Second}, "failover.retry"},
		{"negative cooldown", primary, failover.Options{Cooldown: -time.Second}, "failover.cooldown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := failover.New(tt.primary, ps, tt.opts)
			require.ErrorIs(t, err, quota.ErrInvalid)
			require.ErrorContains(t, err, tt.field)
		})
	}
	s, err := failover.New(primary, ps, failover.Options{})
	require.NoError(t, err)
	require.Equal(t, failover.Closed, s.Mode(), "the zero mode is closed")
}

// outage is a failover store over a real Redis that a test can stop, with a
// hand-moved clock for the breaker and the local store.
type outage struct {
	srv     *redistest.Server
	store   *failover.Store
	primary *countingStore
	clock   *quotatest.Clock
	events  chan bool
}

func newOutage(t *testing.T, opts failover.Options) *outage {
	t.Helper()
	srv := redistest.StartServer(t)
	ropts := srv.Options()
	ropts.MaxRetries = -1 // fail fast once the server is gone
	ropts.DialTimeout = 250 * time.Millisecond
	rdb := goredisClient(t, ropts)
	ps := policies(t)
	rs, err := redis.New(rdb, ps, redis.Options{})
	require.NoError(t, err)
	o := &outage{srv: srv, primary: &countingStore{Store: rs}, clock: quotatest.NewClock(time.Now()), events: make(chan bool, 10)}
	opts.Clock = o.clock
	opts.OnStateChange = func(degraded bool, err error) {
		if degraded {
			require.ErrorIs(t, err, quota.ErrUnavailable)
		} else {
			require.NoError(t, err)
		}
		o.events <- degraded
	}
	o.store, err = failover.New(o.primary, ps, opts)
	require.NoError(t, err)
	return o
}

func (o *outage) reserve(t *testing.T, ticket string) quota.Decision {
	t.Helper()
	d, err := o.store.Reserve(context.Background(), quota.Reservation{Key: gpt4o, Ticket: ticket, Cost: quota.Cost{Requests: 1}})
	require.NoError(t, err)
	return d
}

// down stops Redis and checks the next call turns the store degraded.
func (o *outage) down(t *testing.T, ticket string) quota.Decision {
	t.Helper()
	require.Equal(t, quota.Granted, o.reserve(t, "before").Outcome)
	require.False(t, o.store.Degraded())
	o.srv.Stop()
	calls := o.primary.calls.Load()
	d := o.reserve(t, ticket)
	require.True(t, o.store.Degraded())
	require.True(t, <-o.events, "OnStateChange reports the degradation")
	require.Equal(t, calls+1, o.primary.calls.Load())
	return d
}

// up restarts Redis and checks the primary is used again after the cooldown,
// not before.
func (o *outage) up(t *testing.T) {
	t.Helper()
	o.srv.Restart()
	calls := o.primary.calls.Load()
	o.reserve(t, "during-cooldown")
	require.Equal(t, calls, o.primary.calls.Load(), "the primary is skipped during the cooldown")
	require.True(t, o.store.Degraded())

	o.clock.Advance(failover.DefaultCooldown)
	d := o.reserve(t, "after")
	require.Equal(t, calls+1, o.primary.calls.Load(), "one probe reaches the primary")
	// The server came back empty: the primary restarts the key's bucket
	// from empty rather than hand out a burst, so the probe's call would
	// wait 6 s for it, past MaxWait.
	require.Equal(t, quota.Refused, d.Outcome)
	require.Equal(t, quota.Capacity, d.Reason)
	require.False(t, o.store.Degraded())
	require.False(t, <-o.events, "OnStateChange reports the recovery")
	snap, err := o.store.Snapshot(context.Background(), gpt4o)
	require.NoError(t, err)
	require.InDelta(t, 0, snap.Axes[0].Available, 0.1, "the primary serves the key again, refilling from empty")
}

func TestClosedRefusesWhileRedisIsDown(t *testing.T) {
	o := newOutage(t, failover.Options{Mode: failover.Closed, Retry: 2 * time.Second})
	want := quota.Decision{Outcome: quota.Refused, Reason: quota.Unavailable, Wait: 2 * time.Second}
	require.Equal(t, want, o.down(t, "a"))

	calls := o.primary.calls.Load()
	require.Equal(t, want, o.reserve(t, "b"))
	require.Equal(t, calls, o.primary.calls.Load(), "the breaker skips the primary")
	err := o.store.Settle(context.Background(), quota.Settlement{Key: gpt4o, Ticket: "before", Actual: quota.Cost{Requests: 1}})
	require.ErrorIs(t, err, quota.ErrUnavailable, "a primary ticket cannot be settled while it is down")
	require.NoError(t, o.store.Pause(context.Background(), gpt4o, time.Minute, "x"), "closed drops pauses")
	_, err = o.store.Snapshot(context.Background(), gpt4o)
	require.ErrorIs(t, err, quota.ErrUnavailable)

	o.up(t)
}

func TestOpenAdmitsWhileRedisIsDown(t *testing.T) {
	o := newOutage(t, failover.Options{Mode: failover.Open})
	require.Equal(t, quota.Decision{Outcome: quota.Granted, GrantLeft: quota.DefaultLeaseTTL}, o.down(t, "a"))
	for _, ticket := range []string{"b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		require.Equal(t, quota.Granted, o.reserve(t, ticket).Outcome, "open admits past every limit")
	}
	o.up(t)
	// Tickets admitted open are settled without the primary, which never
	// saw them.
	left, err := o.store.Renew(context.Background(), gpt4o, "a", time.Minute)
	require.NoError(t, err, "a ticket admitted open renews without the primary")
	require.Equal(t, time.Minute, left)
	require.NoError(t, o.store.Settle(context.Background(), quota.Settlement{Key: gpt4o, Ticket: "a", Actual: quota.Cost{Requests: 1}}))
	require.NoError(t, o.store.Cancel(context.Background(), gpt4o, "b"))
}

func TestLocalAdmitsAShareWhileRedisIsDown(t *testing.T) {
	o := newOutage(t, failover.Options{Mode: failover.Local, LocalShare: 0.5})
	ctx := context.Background()
	require.Equal(t, quota.Granted, o.down(t, "a").Outcome)
	for _, ticket := range []string{"b", "c", "d", "e"} {
		require.Equal(t, quota.Granted, o.reserve(t, ticket).Outcome)
	}
	// Half of 10 per minute: the sixth call would wait 12s for the local
	// bucket, past MaxWait.
	d := o.reserve(t, "f")
	require.Equal(t, quota.Refused, d.Outcome)
	require.Equal(t, quota.Capacity, d.Reason)
	require.InDelta(t, float64(12*time.Second), float64(d.Wait), float64(time.Millisecond))

	snap, err := o.store.Snapshot(ctx, gpt4o)
	require.NoError(t, err)
	require.Equal(t, int64(5), snap.Axes[0].Capacity, "the snapshot reads the local store")

	require.NoError(t, o.store.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "a", Actual: quota.Cost{Requests: 1}}))
	o.up(t)
	// Local tickets stay local after recovery.
	require.NoError(t, o.store.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "b", Actual: quota.Cost{Requests: 1}}))
	require.NoError(t, o.store.Cancel(ctx, gpt4o, "c"))
	require.ErrorIs(t, o.store.Settle(ctx, quota.Settlement{Key: gpt4o, Ticket: "a", Actual: quota.Cost{Requests: 1}}), quota.ErrUnknownTicket)
}

// TestOneProbeAtATime: after the cooldown, one call probes the primary while
// the others keep to the fallback.
func TestOneProbeAtATime(t *testing.T) {
	primary := &fakeStore{down: true, release: make(chan struct{})}
	clock := quotatest.NewClock(time.Now())
	s, err := failover.New(primary, policies(t), failover.Options{Mode: failover.Open, Clock: clock})
	require.NoError(t, err)
	ctx := context.Background()
	r := quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1}}

	close(primary.release)
	_, err = s.Reserve(ctx, r)
	require.NoError(t, err)
	require.True(t, s.Degraded())

	clock.Advance(failover.DefaultCooldown)
	primary.release = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := r
		r.Ticket = "probe"
		_, _ = s.Reserve(ctx, r)
	}()
	require.Eventually(t, func() bool { return primary.calls.Load() == 2 }, time.Second, time.Millisecond)
	for i := range 5 {
		r.Ticket = "other-" + string(rune('a'+i))
		d, err := s.Reserve(ctx, r)
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome)
	}
	require.Equal(t, int64(2), primary.calls.Load(), "only the probe reached the primary")
	close(primary.release)
	wg.Wait()
	require.True(t, s.Degraded(), "the probe failed")
}

// TestOnlyUnavailabilityDegrades: other errors, and a caller's cancelled
// context, leave the store healthy.
func TestOnlyUnavailabilityDegrades(t *testing.T) {
	primary := &fakeStore{err: quota.ErrNoPolicy, release: closed()}
	s, err := failover.New(primary, policies(t), failover.Options{})
	require.NoError(t, err)
	_, err = s.Reserve(context.Background(), quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1}})
	require.ErrorIs(t, err, quota.ErrNoPolicy)
	require.False(t, s.Degraded())

	primary.down = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Reserve(ctx, quota.Reservation{Key: gpt4o, Ticket: "t", Cost: quota.Cost{Requests: 1}})
	require.ErrorIs(t, err, quota.ErrUnavailable, "the caller sees the error")
	require.False(t, s.Degraded(), "a cancelled caller says nothing about the primary")
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// fakeStore fails Reserve with ErrUnavailable while down (after release is
// closed), or with err.
type fakeStore struct {
	quota.Store
	down    bool
	err     error
	release chan struct{}
	calls   atomic.Int64
}

func (f *fakeStore) Reserve(ctx context.Context, r quota.Reservation) (quota.Decision, error) {
	f.calls.Add(1)
	<-f.release
	if f.down {
		return quota.Decision{}, errUnavailable
	}
	return quota.Decision{}, f.err
}

var errUnavailable = &wrapped{quota.ErrUnavailable}

type wrapped struct{ error }

func (w *wrapped) Unwrap() error { return w.error }

// countingStore counts Reserve calls reaching the primary.
type countingStore struct {
	quota.Store
	calls atomic.Int64
}

func (c *countingStore) Reserve(ctx context.Context, r quota.Reservation) (quota.Decision, error) {
	c.calls.Add(1)
	return c.Store.Reserve(ctx, r)
}
