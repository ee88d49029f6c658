package quota_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

func TestReservationValidate(t *testing.T) {
	ok := quota.Reservation{Key: quota.Key{Provider: "openai", Model: "gpt-4o"}, Ticket: "ns/wf/run/1", Cost: quota.Cost{Requests: 1}}
	for _, c := range []struct {
		name  string
		edit  func(*quota.Reservation)
		field string
	}{
		{"bad key", func(r *quota.Reservation) { r.Key.Model = "" }, "key.model"},
		{"empty ticket", func(r *quota.Reservation) { r.Ticket = "" }, "ticket"},
		{"long ticket", func(r *quota.Reservation) { r.Ticket = strings.Repeat("x", quota.MaxTicketLen+1) }, "ticket"},
		{"negative lease ttl", func(r *quota.Reservation) { r.LeaseTTL = -time.Second }, "lease_ttl"},
		{"unknown priority", func(r *quota.Reservation) { r.Priority = 1 }, "priority"},
		{"negative cost", func(r *quota.Reservation) { r.Cost.OutputTokens = -1 }, "cost.output_tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ok
			c.edit(&r)
			requireInvalid(t, r.Validate(), c.field)
		})
	}
	require.NoError(t, ok.Validate())
	longest := ok
	longest.Ticket = strings.Repeat("x", quota.MaxTicketLen)
	longest.Priority = quota.Low
	require.NoError(t, longest.Validate())
}

func TestDecisionStrings(t *testing.T) {
	for want, o := range map[string]quota.Outcome{"granted": quota.Granted, "queued": quota.Queued, "refused": quota.Refused, "outcome(0)": 0} {
		require.Equal(t, want, o.String())
	}
	for want, r := range map[string]quota.Reason{
		"none": quota.NoReason, "capacity": quota.Capacity, "daily_limit": quota.DailyLimit,
		"concurrency": quota.ConcurrencyFull, "paused": quota.Paused, "unavailable": quota.Unavailable, "reason(42)": 42,
	} {
		require.Equal(t, want, r.String())
	}
}

func TestErrors(t *testing.T) {
	k := quota.Key{Provider: "openai", Model: "gpt-4o"}

	oversize := error(&quota.OversizeError{Key: k, Axis: quota.Tokens, Cost: 200000, Capacity: 90000})
	require.ErrorIs(t, oversize, quota.ErrOversize)
	require.False(t, errors.Is(oversize, quota.ErrInvalid))
	require.EqualError(t, oversize, "quota: openai/default/gpt-4o costs 200000 tokens but the capacity is 90000: "+
		"it can never fit; lower the request's size (e.g. max tokens) or raise the limit")
	low := error(&quota.OversizeError{Key: k, Axis: quota.Requests, Cost: 9, Capacity: 8, Priority: quota.Low})
	require.EqualError(t, low, "quota: openai/default/gpt-4o costs 9 requests but the capacity open to low priority is 8: "+
		"it can never fit; lower the request's size (e.g. max tokens), raise the limit or lower the priority reserve")

	slot := error(&quota.OversizeError{Key: k, Axis: quota.Concurrency, Cost: 1, Capacity: 0, Priority: quota.Low})
	require.EqualError(t, slot, "quota: openai/default/gpt-4o: a call takes one concurrency slot but low priority may hold 0: "+
		"it can never run; raise the concurrency limit or lower the priority reserve")

	noPolicy := storekit.NoPolicyError(k)
	require.ErrorIs(t, noPolicy, quota.ErrNoPolicy)
	require.ErrorContains(t, noPolicy, "openai/default/gpt-4o")

	invalid := error(&quota.InvalidError{Field: "ticket", Value: "", Problem: "is empty", Fix: "pass one"})
	require.ErrorIs(t, invalid, quota.ErrInvalid)
	require.False(t, errors.Is(invalid, quota.ErrOversize))
	require.EqualError(t, invalid, `quota: ticket "" is empty: pass one`)
}
