package quota_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestAxisNames(t *testing.T) {
	for _, c := range []struct {
		axis quota.Axis
		name string
		kind quota.Kind
	}{
		{quota.Requests, "requests", quota.Bucket},
		{quota.Tokens, "tokens", quota.Bucket},
		{quota.InputTokens, "input_tokens", quota.Bucket},
		{quota.OutputTokens, "output_tokens", quota.Bucket},
		{quota.RequestsPerDay, "requests_per_day", quota.DailyWindow},
		{quota.TokensPerDay, "tokens_per_day", quota.DailyWindow},
		{quota.Concurrency, "concurrency", quota.Leases},
		{quota.SpendPerDay, "spend_per_day", quota.DailyWindow},
		{quota.SpendPerMonth, "spend_per_month", quota.MonthlyWindow},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.True(t, c.axis.Valid())
			require.Equal(t, c.name, c.axis.String())
			require.Equal(t, c.kind, c.axis.Kind())
			parsed, err := quota.ParseAxis(c.name)
			require.NoError(t, err)
			require.Equal(t, c.axis, parsed)
		})
	}
	require.Equal(t, []quota.Axis{quota.Requests, quota.Tokens, quota.InputTokens, quota.OutputTokens,
		quota.RequestsPerDay, quota.TokensPerDay, quota.Concurrency, quota.SpendPerDay, quota.SpendPerMonth}, quota.Axes())
	for _, bad := range []quota.Axis{0, 10, 255} {
		require.False(t, bad.Valid(), "%d", bad)
		require.Zero(t, bad.Kind())
	}
	require.Equal(t, "axis(0)", quota.Axis(0).String())
	require.Equal(t, "axis(10)", quota.Axis(10).String())

	_, err := quota.ParseAxis("rpm")
	require.ErrorIs(t, err, quota.ErrInvalid)
	require.ErrorContains(t, err, `axis "rpm" is not a known axis`)
}

func TestLimitConstructors(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	for _, c := range []struct {
		name  string
		limit quota.Limit
		want  quota.Limit
		str   string
		rate  float64
	}{
		{"per minute", quota.PerMinute(quota.Tokens, 90000),
			quota.Limit{Axis: quota.Tokens, Capacity: 90000, Period: time.Minute}, "90000 tokens/1m0s", 1500},
		{"per second", quota.PerSecond(quota.Requests, 5),
			quota.Limit{Axis: quota.Requests, Capacity: 5, Period: time.Second}, "5 requests/1s", 5},
		{"per", quota.Per(quota.OutputTokens, 10, 2*time.Second),
			quota.Limit{Axis: quota.OutputTokens, Capacity: 10, Period: 2 * time.Second}, "10 output_tokens/2s", 5},
		{"per day requests", quota.PerDay(quota.Requests, 10000, la),
			quota.Limit{Axis: quota.RequestsPerDay, Capacity: 10000, Location: la}, "10000 requests_per_day (America/Los_Angeles)", 0},
		{"per day tokens utc", quota.PerDay(quota.Tokens, 5, nil),
			quota.Limit{Axis: quota.TokensPerDay, Capacity: 5}, "5 tokens_per_day (UTC)", 0},
		{"per day axis given", quota.PerDay(quota.TokensPerDay, 5, nil),
			quota.Limit{Axis: quota.TokensPerDay, Capacity: 5}, "5 tokens_per_day (UTC)", 0},
		{"concurrent", quota.Concurrent(20),
			quota.Limit{Axis: quota.Concurrency, Capacity: 20}, "20 concurrency", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireLimit(t, c.want, c.limit)
			require.Equal(t, c.str, c.limit.String())
			require.InDelta(t, c.rate, c.limit.Rate(), 1e-12)
			require.NoError(t, c.limit.Validate())
		})
	}
	require.Equal(t, time.UTC, quota.PerDay(quota.Tokens, 1, nil).Zone())
	require.Equal(t, la, quota.PerDay(quota.Tokens, 1, la).Zone())
}

func TestLimitValidate(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit quota.Limit
		field string
	}{
		{"zero limit", quota.Limit{}, "limit.axis"},
		{"unknown axis", quota.Limit{Axis: 12, Capacity: 1, Period: time.Second}, "limit.axis"},
		{"zero capacity", quota.PerMinute(quota.Requests, 0), "limit.requests.capacity"},
		{"negative capacity", quota.PerMinute(quota.Tokens, -5), "limit.tokens.capacity"},
		{"negative daily capacity", quota.PerDay(quota.Requests, -1, nil), "limit.requests_per_day.capacity"},
		{"zero concurrency", quota.Concurrent(0), "limit.concurrency.capacity"},
		{"huge capacity", quota.PerMinute(quota.Tokens, math.MaxInt64), "limit.tokens.capacity"},
		{"zero period", quota.Per(quota.Requests, 10, 0), "limit.requests.period"},
		{"negative period", quota.Per(quota.InputTokens, 10, -time.Second), "limit.input_tokens.period"},
		{"nanosecond period", quota.Per(quota.Requests, 1, time.Nanosecond), "limit.requests.period"},
		{"period under a millisecond", quota.Per(quota.Tokens, 10, time.Millisecond-time.Microsecond), "limit.tokens.period"},
		{"literal period under a millisecond", quota.Limit{Axis: quota.Requests, Capacity: 1, Period: 999 * time.Microsecond}, "limit.requests.period"},
		{"per with a daily axis", quota.Per(quota.RequestsPerDay, 10, time.Minute), "limit.axis"},
		{"per with a daily axis and no period", quota.Per(quota.TokensPerDay, 10, 0), "limit.axis"},
		{"per minute with concurrency", quota.PerMinute(quota.Concurrency, 10), "limit.axis"},
		{"per day with input tokens", quota.PerDay(quota.InputTokens, 10, nil), "limit.axis"},
		{"per day with output tokens", quota.PerDay(quota.OutputTokens, 10, time.UTC), "limit.axis"},
		{"per day with concurrency", quota.PerDay(quota.Concurrency, 10, nil), "limit.axis"},
	} {
		t.Run(c.name, func(t *testing.T) { requireInvalid(t, c.limit.Validate(), c.field) })
	}
	require.NoError(t, quota.Per(quota.Requests, 1, time.Millisecond).Validate(), "a millisecond is long enough")
	require.NoError(t, quota.Limit{Axis: quota.RequestsPerDay, Capacity: 1}.Validate(), "a literal is judged by its axis")
}

// TestLimitWrongAxisSaysWhatToUse: a constructor given an axis it cannot
// limit says which constructor can.
func TestLimitWrongAxisSaysWhatToUse(t *testing.T) {
	for _, c := range []struct {
		name    string
		limit   quota.Limit
		problem string
		fix     string
	}{
		{"per with requests per day", quota.Per(quota.RequestsPerDay, 10, time.Minute),
			"does not refill over a period", "quota.PerDay(quota.Requests, n, zone)"},
		{"per with concurrency", quota.PerSecond(quota.Concurrency, 10),
			"does not refill over a period", "quota.Concurrent(n)"},
		{"per day with input tokens", quota.PerDay(quota.InputTokens, 10, nil),
			"has no daily limit: quota.PerDay takes requests or tokens", "limit input_tokens per period with quota.PerMinute"},
		{"per day with concurrency", quota.PerDay(quota.Concurrency, 10, nil),
			"has no daily limit", "quota.Concurrent(n)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.limit.Validate()
			var invalid *quota.InvalidError
			require.ErrorAs(t, err, &invalid)
			require.Equal(t, c.limit.Axis.String(), invalid.Value)
			require.Contains(t, invalid.Problem, c.problem)
			require.Contains(t, invalid.Fix, c.fix)
			require.Equal(t, "limit.axis", invalid.Field, "the error is about the axis, not a period")
		})
	}
}

// requireLimit requires got to have want's fields.
func requireLimit(t *testing.T, want, got quota.Limit) {
	t.Helper()
	require.Equal(t, want.Axis, got.Axis)
	require.Equal(t, want.Capacity, got.Capacity)
	require.Equal(t, want.Period, got.Period)
	require.Equal(t, want.Location, got.Location)
}

// requireInvalid requires err to be an *quota.InvalidError about field with
// a fix.
func requireInvalid(t *testing.T, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, quota.ErrInvalid)
	var invalid *quota.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, field, invalid.Field, "%v", err)
	require.NotEmpty(t, invalid.Problem)
	require.NotEmpty(t, invalid.Fix)
	require.ErrorContains(t, err, field)
}
