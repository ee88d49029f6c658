package quotatest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

// requireInvalid requires err to be an *quota.InvalidError about field.
func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, quota.ErrInvalid)
	var invalid *quota.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, field, invalid.Field, "the error names the field: %v", err)
	require.ErrorContains(t, err, field)
}

// testInvalidInput: bad input is an *quota.InvalidError naming the field,
// and changes nothing.
func testInvalidInput(t *testing.T, s suite) {
	e := s.setup(t, "invalid", quota.Policy{Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute)}})
	ctx, st, k := e.ctx, e.store, e.key
	noProvider, noModel := k, k
	noProvider.Provider = ""
	noModel.Model = ""
	for _, c := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"reserve empty provider", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: noProvider, Ticket: "t", Cost: reqs(1)})
			return err
		}, "key.provider"},
		{"reserve empty model", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: noModel, Ticket: "t", Cost: reqs(1)})
			return err
		}, "key.model"},
		{"reserve empty ticket", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: k, Cost: reqs(1)})
			return err
		}, "ticket"},
		{"reserve negative cost", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: k, Ticket: "t", Cost: quota.Cost{Requests: 1, Tokens: -5}})
			return err
		}, "cost.tokens"},
		{"reserve unknown priority", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: k, Ticket: "t", Cost: reqs(1), Priority: 7})
			return err
		}, "priority"},
		{"settle negative cost", func() error {
			return st.Settle(ctx, quota.Settlement{Key: k, Ticket: "t", Actual: quota.Cost{Requests: -1}})
		}, "cost.requests"},
		{"settle empty key", func() error {
			return st.Settle(ctx, quota.Settlement{Key: noProvider, Ticket: "t", Actual: reqs(1)})
		}, "key.provider"},
		{"settle empty ticket", func() error {
			return st.Settle(ctx, quota.Settlement{Key: k, Actual: reqs(1)})
		}, "ticket"},
		{"cancel empty key", func() error { return st.Cancel(ctx, noModel, "t") }, "key.model"},
		{"cancel empty ticket", func() error { return st.Cancel(ctx, k, "") }, "ticket"},
		{"reserve negative lease ttl", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: k, Ticket: "t", Cost: reqs(1), LeaseTTL: -time.Second})
			return err
		}, "lease_ttl"},
		{"reserve ticket too long", func() error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: k, Ticket: strings.Repeat("t", quota.MaxTicketLen+1), Cost: reqs(1)})
			return err
		}, "ticket"},
		{"settle negative charged", func() error {
			return st.Settle(ctx, quota.Settlement{Key: k, Ticket: "t", Actual: reqs(1), Charged: quota.Cost{Tokens: -1}})
		}, "cost.tokens"},
		{"renew empty ticket", func() error { _, err := st.Renew(ctx, k, "", 0); return err }, "ticket"},
		{"renew negative ttl", func() error { _, err := st.Renew(ctx, k, "t", -time.Second); return err }, "ttl"},
		{"renew empty key", func() error { _, err := st.Renew(ctx, noModel, "t", 0); return err }, "key.model"},
		{"pause empty key", func() error { return st.Pause(ctx, noProvider, time.Minute, quota.PauseOverloaded) }, "key.provider"},
		{"pause unknown reason", func() error { return st.Pause(ctx, k, time.Minute, "too many requests") }, "reason"},
		{"observe unknown axis", func() error {
			return st.Observe(ctx, k, []quota.Observation{{Axis: 42, Limit: -1, Remaining: 0}})
		}, "observation.axis"},
		{"observe zero axis", func() error {
			return st.Observe(ctx, k, []quota.Observation{{Limit: -1, Remaining: 0}})
		}, "observation.axis"},
		{"snapshot empty key", func() error {
			_, err := st.Snapshot(ctx, noModel)
			return err
		}, "key.model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireInvalid(t, c.call(), c.field)
			e.level(rq, 10)
		})
	}
}

// testNoPolicy: a key with no policy (and no account-wide policy to fall
// back on) is ErrNoPolicy everywhere; a tenant without a policy of its own is
// charged against its account's, and a tenant with one against its own and
// its account's.
func testNoPolicy(t *testing.T, s suite) {
	account := s.key("tenants")
	vip := account
	vip.Tenant = "vip"
	other := account
	other.Tenant = "other"
	e := s.setupKeys(t, account, map[quota.Key]quota.Policy{
		account: {Limits: []quota.Limit{quota.PerMinute(rq, 10).WithBurst(time.Minute)}},
		vip:     {Limits: []quota.Limit{quota.PerMinute(rq, 5).WithBurst(time.Minute)}},
	}, start())
	ctx, st := e.ctx, e.store

	_, err := st.Reserve(ctx, quota.Reservation{Key: other, Ticket: "other-1", Cost: reqs(2)})
	require.NoError(t, err)
	_, err = st.Reserve(ctx, quota.Reservation{Key: vip, Ticket: "vip-1", Cost: reqs(1)})
	require.NoError(t, err)
	e.level(rq, 7)
	snap, err := st.Snapshot(ctx, vip)
	require.NoError(t, err)
	require.Len(t, snap.Axes, 1)
	require.InDelta(t, 4, snap.Axes[0].Available, LevelDelta)

	missing := s.key("no-policy")
	for _, c := range []struct {
		name string
		call func(context.Context, quota.Key) error
	}{
		{"reserve", func(ctx context.Context, k quota.Key) error {
			_, err := st.Reserve(ctx, quota.Reservation{Key: k, Ticket: "t", Cost: reqs(1)})
			return err
		}},
		{"settle", func(ctx context.Context, k quota.Key) error {
			return st.Settle(ctx, quota.Settlement{Key: k, Ticket: "t", Actual: reqs(1)})
		}},
		{"cancel", func(ctx context.Context, k quota.Key) error { return st.Cancel(ctx, k, "t") }},
		{"renew", func(ctx context.Context, k quota.Key) error {
			_, err := st.Renew(ctx, k, "t", 0)
			return err
		}},
		{"pause", func(ctx context.Context, k quota.Key) error {
			return st.Pause(ctx, k, time.Minute, quota.PauseOverloaded)
		}},
		{"observe", func(ctx context.Context, k quota.Key) error {
			return st.Observe(ctx, k, []quota.Observation{{Axis: rq, Limit: -1, Remaining: 0}})
		}},
		{"snapshot", func(ctx context.Context, k quota.Key) error {
			_, err := st.Snapshot(ctx, k)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(ctx, missing)
			require.ErrorIs(t, err, quota.ErrNoPolicy)
			require.False(t, errors.Is(err, quota.ErrInvalid))
			require.ErrorContains(t, err, missing.String(), "the error names the key")
		})
	}
}

// testSnapshot: a snapshot reports every limited axis in quota.Axes() order
// with its effective capacity, what is available and, for daily windows, the
// next reset; a key whose policy has no limits admits everything.
func testSnapshot(t *testing.T, s suite) {
	e := s.setup(t, "snapshot", quota.Policy{Limits: []quota.Limit{
		quota.Concurrent(4),
		quota.PerDay(tk, 1000, nil),
		quota.PerDay(rq, 100, nil),
		quota.PerMinute(quota.OutputTokens, 600).WithBurst(time.Minute),
		quota.PerMinute(quota.InputTokens, 1200).WithBurst(time.Minute),
		quota.PerMinute(tk, 1800).WithBurst(time.Minute),
		quota.PerMinute(rq, 60).WithBurst(time.Minute),
	}})
	midnight := time.Date(2025, time.January, 16, 0, 0, 0, 0, time.UTC)
	requireLevels := func(want []quota.AxisLevel) {
		t.Helper()
		snap := e.snapshot()
		requireTime(t, e.clock.Now(), snap.At, "snapshot time")
		require.True(t, snap.PausedUntil.IsZero())
		require.Len(t, snap.Axes, len(want))
		for i, w := range want {
			got := snap.Axes[i]
			require.Equal(t, w.Axis, got.Axis, "axis %d", i)
			require.Equal(t, w.Capacity, got.Capacity, "capacity of %s", w.Axis)
			require.InDelta(t, w.Available, got.Available, LevelDelta, "available %s", w.Axis)
			requireTime(t, w.ResetAt, got.ResetAt, "reset of %s", w.Axis)
		}
	}
	requireLevels([]quota.AxisLevel{
		{Axis: rq, Capacity: 60, Available: 60},
		{Axis: tk, Capacity: 1800, Available: 1800},
		{Axis: quota.InputTokens, Capacity: 1200, Available: 1200},
		{Axis: quota.OutputTokens, Capacity: 600, Available: 600},
		{Axis: rpd, Capacity: 100, Available: 100, ResetAt: midnight},
		{Axis: tpd, Capacity: 1000, Available: 1000, ResetAt: midnight},
		{Axis: cc, Capacity: 4, Available: 4},
	})
	e.expect(leased(start().Add(quota.DefaultLeaseTTL)), "a",
		quota.Cost{Requests: 1, Tokens: 100, InputTokens: 60, OutputTokens: 40})
	e.clock.Advance(time.Second)
	requireLevels([]quota.AxisLevel{
		{Axis: rq, Capacity: 60, Available: 60},
		{Axis: tk, Capacity: 1800, Available: 1730},
		{Axis: quota.InputTokens, Capacity: 1200, Available: 1160},
		{Axis: quota.OutputTokens, Capacity: 600, Available: 570},
		{Axis: rpd, Capacity: 100, Available: 99, ResetAt: midnight},
		{Axis: tpd, Capacity: 1000, Available: 900, ResetAt: midnight},
		{Axis: cc, Capacity: 4, Available: 3},
	})

	free := s.setup(t, "snapshot-unlimited", quota.Policy{})
	free.expect(granted, "a", quota.Cost{Requests: 1, Tokens: 1 << 40})
	require.Empty(t, free.snapshot().Axes)
}
