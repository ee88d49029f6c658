package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testnet"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/quota/storekit"
	"github.com/tollgate/tollgate/testsuite/redistest"
	"github.com/tollgate/tollgate/worker"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// With Redis down, status fails and says so: the failover store a worker
// falls back on would show full stand-in buckets that nobody shares.
func TestStatusFailsWhenRedisIsUnreachable(t *testing.T) {
	cfg := config{Config: worker.Config{RedisURL: "redis://" + testnet.FreeAddr(t) + "/0", StoreFailure: "local", StoreLocalShare: 0.5}}
	var out bytes.Buffer
	err := status(context.Background(), cfg, &out, quietLogger())
	require.Error(t, err)
	require.ErrorContains(t, err, "REDIS_URL")
	require.ErrorContains(t, err, "unreachable")
	require.NotContains(t, out.String(), "[#", "no levels are printed")
}

// status reads the levels the fleet shares: budget spent through one client
// of the Redis shows as lowered levels.
func TestStatusShowsWhatTheFleetSpentInRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	ps := defaultBudgets().Policies
	fleet, err := redis.New(srv.Client(), ps, redis.Options{})
	require.NoError(t, err)
	key := quota.Key{Provider: "openai", Model: simPrimary}
	d, err := fleet.Reserve(context.Background(), quota.Reservation{Key: key, Ticket: "status-test", Cost: quota.Cost{Requests: 20, Tokens: 50_000}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome)

	var out bytes.Buffer
	require.NoError(t, status(context.Background(), config{Config: worker.Config{RedisURL: srv.URL()}}, &out, quietLogger()))
	require.Contains(t, out.String(), "store: Redis")

	// A burst of 0.95 requests (a second of 57 a minute: 60 less 5%
	// headroom) less 20, plus what refilled since at 0.95 a second; a
	// burst of 3166.67 tokens less 50000, likewise.
	requests := available(t, out.String(), "openai/default/gpt-4o-mini", "requests", 57)
	require.GreaterOrEqual(t, requests, -19.06)
	require.Less(t, requests, -10.0, "status shows the spent budget:\n%s", out.String())
	tokens := available(t, out.String(), "openai/default/gpt-4o-mini", "tokens", 190000)
	require.Less(t, tokens, -40_000.0, "status shows the spent budget:\n%s", out.String())
	require.Equal(t, 10.0, available(t, out.String(), "openai/default/gpt-4o", "requests", 600), "untouched keys stay full: a second of 600 a minute")
}

// status reads a Redis Cluster named the way the worker takes it,
// redis+cluster://host:port,…: budget spent through another client of the
// cluster shows as lowered levels, on keys whose slots sit on different
// masters.
func TestStatusReadsARedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	ps := defaultBudgets().Policies
	fleet, err := redis.New(cluster.Client(), ps, redis.Options{})
	require.NoError(t, err)
	key := quota.Key{Provider: "openai", Model: simPrimary}
	d, err := fleet.Reserve(context.Background(), quota.Reservation{Key: key, Ticket: "status-test", Cost: quota.Cost{Requests: 20, Tokens: 50_000}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome)

	var out bytes.Buffer
	require.NoError(t, status(context.Background(), config{Config: worker.Config{RedisURL: cluster.URL()}}, &out, quietLogger()))
	require.Contains(t, out.String(), "store: Redis Cluster "+strings.Join(cluster.Addrs(), ","))
	require.Less(t, available(t, out.String(), "openai/default/gpt-4o-mini", "requests", 57), -10.0, "status shows the spent budget:\n%s", out.String())
	require.Equal(t, 10.0, available(t, out.String(), "openai/default/gpt-4o", "requests", 600), "untouched keys stay full")
}

// available reads one row's AVAILABLE column (after BURST) from writeStatus's table.
func available(t *testing.T, table, key, axis string, capacity int) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s+` + axis + `\s+` + strconv.Itoa(capacity) + `\s+\S+\s+(-?[0-9.]+)\s`)
	m := re.FindStringSubmatch(table)
	require.NotNil(t, m, "no %s %s row with capacity %d in:\n%s", key, axis, capacity, table)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// A Gemini key closed by its daily quota shows in status, with when it
// reopens: the next midnight in Los Angeles.
func TestStatusShowsAGeminiKeyClosedUntilMidnightPacific(t *testing.T) {
	srv := redistest.StartServer(t)
	fleet, err := redis.New(srv.Client(), defaultBudgets().Policies, redis.Options{})
	require.NoError(t, err)
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	y, m, d := time.Now().In(la).Date()
	midnight := time.Date(y, m, d+1, 0, 0, 0, 0, la)
	key := quota.Key{Provider: "gemini", Model: simGemini}
	require.NoError(t, fleet.Pause(context.Background(), key, time.Until(midnight), quota.PauseDailyQuota))

	var out bytes.Buffer
	require.NoError(t, status(context.Background(), config{Config: worker.Config{RedisURL: srv.URL()}}, &out, quietLogger()))
	require.Regexp(t, `(?m)^gemini/default/gemini-2\.5-flash\s+requests\s+8\s.*closed until `+regexp.QuoteMeta(midnight.UTC().Format(time.RFC3339))+`, in \S+ \(daily_quota\)`, out.String())
	require.Equal(t, 200.0, available(t, out.String(), "gemini/default/gemini-2.5-flash", "requests_per_day", 200), "250 a day less 20% headroom")
}

// status shows the estimate ratio a key has learned on the axes it scales.
func TestStatusShowsTheLearnedEstimateRatio(t *testing.T) {
	srv := redistest.StartServer(t)
	ps := defaultBudgets().Policies
	fleet, err := redis.New(srv.Client(), ps, redis.Options{})
	require.NoError(t, err)
	key := quota.Key{Provider: "openai", Model: simPrimary}
	ctx := context.Background()
	for i := range 3 {
		ticket := "ratio-" + strconv.Itoa(i)
		est := quota.Cost{Requests: 1, Tokens: 1000, InputTokens: 1000, OutputTokens: 64}
		r := quota.Reservation{Key: key, Ticket: ticket, Cost: est, Prompt: 1000}
		d, err := fleet.Reserve(ctx, r)
		require.NoError(t, err)
		for d.Outcome == quota.Queued { // a second's burst: one call at once
			time.Sleep(d.Wait)
			d, err = fleet.Reserve(ctx, r)
			require.NoError(t, err)
		}
		require.Equal(t, quota.Granted, d.Outcome)
		require.NoError(t, fleet.Settle(ctx, quota.Settlement{Key: key, Ticket: ticket, Counted: true, Prompt: 1000,
			Actual: quota.Cost{Requests: 1, Tokens: 1300, InputTokens: 1300, OutputTokens: 20}}))
	}
	var out bytes.Buffer
	require.NoError(t, status(ctx, config{Config: worker.Config{RedisURL: srv.URL()}}, &out, quietLogger()))
	require.Regexp(t, `(?m)^openai/default/gpt-4o-mini\s+tokens\s+.*×1\.30`, out.String())
	require.Regexp(t, `(?m)^openai/default/gpt-4o-mini\s+requests\s+.*\s-\s`, out.String(), "requests are counted, not estimated")
}

// status lists what waits in a saturated account's line per tenant, with
// each tenant's weight, once: a tenant nested in its account's budget shows
// in its account's line, not again under its own key.
func TestStatusShowsEachTenantsPlaceInASaturatedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 1, tokens_per_minute: 100000}
    tenant_weights: {acme: 2}
  - provider: openai
    model: gpt-4o
    tenant: beta
    weight: 0.5
    limits: {requests_per_minute: 60}
  - provider: openai
    model: gpt-4o-mini
    limits: {requests_per_minute: 60}
`), 0o600))
	b, err := worker.LoadPolicies(path)
	require.NoError(t, err)
	srv := redistest.StartServer(t)
	fleet, err := redis.New(srv.Client(), b.Policies, redis.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	account := quota.Key{Provider: "openai", Model: "gpt-4o"}
	for i, tenant := range []string{"", "acme", "acme", "beta", "", "zed"} {
		k := account
		k.Tenant = tenant
		d, err := fleet.Reserve(ctx, quota.Reservation{Key: k, Ticket: "line-" + strconv.Itoa(i), Cost: quota.Cost{Requests: 1, Tokens: 500}})
		require.NoError(t, err)
		want := quota.Queued
		if i == 0 {
			want = quota.Granted // the account's one request a minute
		}
		require.Equal(t, want, d.Outcome, "call %d", i)
	}

	var out bytes.Buffer
	require.NoError(t, status(ctx, config{Config: worker.Config{RedisURL: srv.URL(), Policies: path}}, &out, quietLogger()))
	table := out.String()
	_, lines, ok := strings.Cut(table, "waiting for capacity, per tenant")
	require.True(t, ok, "status lists the line:\n%s", table)
	for _, row := range []string{
		`openai/default/gpt-4o\s+\(none\)\s+1\s+1\s+requests=1 tokens=500`,
		`openai/default/gpt-4o\s+acme\s+2\s+2\s+requests=2 tokens=1000`,
		`openai/default/gpt-4o\s+beta\s+0\.5\s+1\s+requests=1 tokens=500`,
		`openai/default/gpt-4o\s+zed\s+1\s+1\s+requests=1 tokens=500`,
	} {
		require.Regexp(t, `(?m)^`+row+`$`, lines)
	}
	require.Equal(t, 4, strings.Count(lines, "openai/"), "one row per tenant in line, the nested tenant's once:\n%s", table)
	require.NotContains(t, lines, "gpt-4o-mini", "a key with nothing in line has no rows")
}

// With nothing in line, status prints no line table.
func TestStatusPrintsNoLineWhenNothingWaits(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, status(context.Background(), config{}, &out, quietLogger()))
	require.NotContains(t, out.String(), "waiting for capacity")
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		name      string
		available float64
		capacity  int64
		want      string
	}{
		{"full", 57, 57, "[##########]"},
		{"half, rounded", 28.6, 57, "[#####.....]"},
		{"over capacity", 80, 57, "[##########]"},
		{"empty", 0, 57, "[..........]"},
		{"queued: negative", -3, 57, "[!.........]"},
		{"no capacity", 5, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, bar(tc.available, tc.capacity, 10))
		})
	}
}

// status says when the store dropped records it could not read, and not
// otherwise.
func TestStatusNoteCountsUnreadableRecords(t *testing.T) {
	require.Empty(t, statusNote(quota.Snapshot{}))
	require.Equal(t, "3 unreadable records dropped (a newer release's?)", statusNote(quota.Snapshot{Unreadable: 3}))
}

// status lists each pool's members and whether each takes calls: a member
// closed by its spend cap shows so, the others open.
func TestStatusShowsEachPoolMember(t *testing.T) {
	srv := redistest.StartServer(t)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`pools:
  - provider: openai
    model: gpt-4o
    members:
      - {account: east, api_key_env: OPENAI_EAST_API_KEY, limits: {requests_per_minute: 600}}
      - {account: west, api_key_env: OPENAI_WEST_API_KEY, limits: {requests_per_minute: 600}}
`), 0o600))
	b, err := worker.LoadPolicies(path)
	require.NoError(t, err)
	fleet, err := redis.New(srv.Client(), b.Policies, redis.Options{})
	require.NoError(t, err)
	east := quota.Key{Provider: "openai", Account: "east", Model: "gpt-4o"}
	require.NoError(t, fleet.Pause(context.Background(), east, time.Hour, quota.PauseSpendCap))

	var out bytes.Buffer
	require.NoError(t, status(context.Background(), config{Config: worker.Config{RedisURL: srv.URL(), Policies: path}}, &out, quietLogger()))
	require.Regexp(t, `openai/default/gpt-4o\s+openai/east/gpt-4o\s+10\s+closed until \S+, in 1h0m0s \(spend_cap\)`, out.String())
	require.Regexp(t, `openai/default/gpt-4o\s+openai/west/gpt-4o\s+10\s+open`, out.String())
}

// moneyPolicies: an account's daily money budget beside its rate limit, and
// a tenant's monthly one, both at midnight in Los Angeles.
const moneyPolicies = `policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 600, spend_per_day: 100, zone: America/Los_Angeles}
  - provider: openai
    model: gpt-4o
    tenant: acme
    limits: {spend_per_month: 50, zone: America/Los_Angeles}
`

// status shows a money budget in money, what is left of what, and when
// its period starts again, not as a count of units.
func TestStatusShowsMoneyBudgetsAsMoney(t *testing.T) {
	b, err := worker.ParsePolicies([]byte(moneyPolicies))
	require.NoError(t, err)
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	store, err := memory.New(b.Policies, memory.Options{Clock: quotatest.NewClock(time.Date(2026, 12, 15, 9, 0, 0, 0, la))})
	require.NoError(t, err)
	acme := quota.Key{Provider: "openai", Model: "gpt-4o", Tenant: "acme"}
	d, err := store.Reserve(context.Background(), quota.Reservation{Key: acme, Ticket: "spent",
		Cost: quota.Cost{Requests: 1, Tokens: 1000, Spend: int64(quota.Dollars(37.60))}})
	require.NoError(t, err)
	require.Equal(t, quota.Granted, d.Outcome)

	var out bytes.Buffer
	require.NoError(t, writeStatus(context.Background(), &out, store, b.Policies, b.Pools))
	table := out.String()
	require.Regexp(t, `(?m)^openai/default/gpt-4o/acme\s+spend_per_month\s+50\.00\s+-\s+12\.40\s+\[##\.+\]\s+-\s+12\.40 of 50\.00 left, resets 2027-01-01T08:00:00Z$`, table)
	require.Regexp(t, `(?m)^openai/default/gpt-4o\s+spend_per_day\s+100\.00\s+-\s+62\.40\s+\S+\s+-\s+62\.40 of 100\.00 left, resets 2026-12-16T08:00:00Z$`, table,
		"the account is charged its tenant's call")
	require.Equal(t, 9.0, available(t, table, "openai/default/gpt-4o", "requests", 600), "the rate axes keep their units: a second of 600 a minute, less the call")
	require.NotContains(t, table, "37600000", "no money shown in millionths")
	require.NotContains(t, table, "50000000")
}

// status with no REDIS_URL reads a policies file's money budgets from a
// fresh memory store: every budget whole.
func TestStatusShowsFullMoneyBudgetsWithoutRedis(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(moneyPolicies), 0o600))
	var out bytes.Buffer
	require.NoError(t, status(context.Background(), config{Config: worker.Config{Policies: path}}, &out, quietLogger()))
	require.Regexp(t, `(?m)^openai/default/gpt-4o/acme\s+spend_per_month\s+50\.00\s.*50\.00 of 50\.00 left, resets \S+Z$`, out.String())
	require.Regexp(t, `(?m)^openai/default/gpt-4o\s+spend_per_day\s+100\.00\s.*100\.00 of 100\.00 left, resets \S+Z$`, out.String())
}

// status shows each bucket axis's learned margin, those that learned
// anything, and a tenant's own budget (no axis margins) its account's.
func TestStatusNoteShowsEachAxisMargin(t *testing.T) {
	snap := quota.Snapshot{Axes: []quota.AxisLevel{
		{Axis: quota.Requests, Margin: quota.Margin{Burst: 0.5, Rate: 0.98, Refused: 1}},
		{Axis: quota.Tokens, Margin: storekit.NoMargin},
		{Axis: quota.Concurrency},
	}, Margin: quota.Margin{Burst: 0.5, Rate: 0.98, Refused: 1}}
	require.Equal(t, "margin learned: requests burst ×0.50, rate ×0.980, the provider refused ×1.00", statusNote(snap))
	snap.Axes[1].Margin = quota.Margin{Burst: 3, Rate: 1}
	require.Equal(t, "margin learned: requests burst ×0.50, rate ×0.980, the provider refused ×1.00; tokens burst ×3.00, rate ×1.000, none refused", statusNote(snap))
	require.Equal(t, "margin learned: burst ×0.50, rate ×0.980, the provider refused ×1.00", statusNote(quota.Snapshot{Margin: snap.Margin}))
}
