package worker

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/quota/storekit"
	"github.com/tollgate/tollgate/testsuite/redistest"
)

// lineBudgets: an account of two requests a minute weighing tenant acme in
// tenant_weights, with tenant beta's budget nested in it, and a tenant solo
// whose budget stands alone (its account has no policy).
const lineBudgets = `policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 2, tokens_per_minute: 100000, burst: 1m}
    tenant_weights: {acme: 2}
  - provider: openai
    model: gpt-4o
    tenant: beta
    limits: {requests_per_minute: 60}
  - provider: openai
    model: gpt-4o
    tenant: quiet
    limits: {requests_per_minute: 60}
  - provider: openai
    model: gpt-4o-mini
    tenant: solo
    limits: {requests_per_minute: 1}
`

// The line gauges report what waits in each account's line per tenant,
// under the same bounded tenant label as the other metrics: tenants the
// policies file names by name, every other tenant as "other", untenanted
// calls as "none"; a named tenant with nothing in line reads 0.
func TestLineGaugesCountEachTenantsPlacesUnderABoundedLabel(t *testing.T) {
	b, err := ParsePolicies([]byte(lineBudgets))
	require.NoError(t, err)
	stores := map[string]func(t *testing.T) quota.Store{
		"memory": func(t *testing.T) quota.Store {
			s, err := memory.New(b.Policies, memory.Options{Clock: quotatest.NewClock(time.Now())})
			require.NoError(t, err)
			return s
		},
		"redis": func(t *testing.T) quota.Store {
			s, err := redis.New(redistest.Start(t), b.Policies, redis.Options{})
			require.NoError(t, err)
			return s
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			ctx := context.Background()
			account := quota.Key{Provider: "openai", Model: "gpt-4o"}
			reserve := func(k quota.Key, ticket string, want quota.Outcome) {
				t.Helper()
				d, err := store.Reserve(ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: quota.Cost{Requests: 1, Tokens: 100}})
				require.NoError(t, err)
				require.Equal(t, want, d.Outcome, "%s on %s", ticket, k)
			}
			tenant := func(k quota.Key, name string) quota.Key { k.Tenant = name; return k }
			// Two calls take the account's two requests; the rest wait.
			reserve(account, "first", quota.Granted)
			reserve(account, "second", quota.Granted)
			for i, tn := range []string{"acme", "acme", "beta", "zed", "zork", "zork", ""} {
				reserve(tenant(account, tn), fmt.Sprintf("wait-%d", i), quota.Queued)
			}
			solo := tenant(quota.Key{Provider: "openai", Model: "gpt-4o-mini"}, "solo")
			reserve(solo, "solo-0", quota.Granted)
			reserve(solo, "solo-1", quota.Queued)

			reader := sdkmetric.NewManualReader()
			meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
			require.NoError(t, registerGauges(meter, store, b))
			var rm metricdata.ResourceMetrics
			require.NoError(t, reader.Collect(ctx, &rm))

			require.Equal(t, map[string]int64{
				"openai/default/gpt-4o acme":      2,
				"openai/default/gpt-4o beta":      1,
				"openai/default/gpt-4o other":     3,
				"openai/default/gpt-4o none":      1,
				"openai/default/gpt-4o quiet":     0,
				"openai/default/gpt-4o-mini solo": 1,
			}, gaugePoints(t, rm, MetricLineQueued, "key", "tenant"))
			require.Equal(t, map[string]int64{
				"openai/default/gpt-4o acme requests":      2,
				"openai/default/gpt-4o acme tokens":        200,
				"openai/default/gpt-4o beta requests":      1,
				"openai/default/gpt-4o beta tokens":        100,
				"openai/default/gpt-4o other requests":     3,
				"openai/default/gpt-4o other tokens":       300,
				"openai/default/gpt-4o none requests":      1,
				"openai/default/gpt-4o none tokens":        100,
				"openai/default/gpt-4o quiet requests":     0,
				"openai/default/gpt-4o quiet tokens":       0,
				"openai/default/gpt-4o-mini solo requests": 1,
			}, gaugePoints(t, rm, MetricLineCost, "key", "tenant", "axis"))
		})
	}
}

// gaugePoints returns an int64 gauge's points, keyed by the values of
// attrs joined with spaces.
func gaugePoints(t *testing.T, rm metricdata.ResourceMetrics, name string, attrs ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			g, ok := m.Data.(metricdata.Gauge[int64])
			require.True(t, ok, "%s is a %T", name, m.Data)
			for _, dp := range g.DataPoints {
				var id string
				for i, a := range attrs {
					v, ok := dp.Attributes.Value(attribute.Key(a))
					require.True(t, ok, "%s has attribute %s", name, a)
					if i > 0 {
						id += " "
					}
					id += v.AsString()
				}
				_, dup := out[id]
				require.False(t, dup, "%s reports %q once per collection", name, id)
				out[id] = dp.Value
			}
		}
	}
	return out
}

// spendBudgets: an account of 20.00 a day in Los Angeles with a tenant of
// 5.00 a month of its own, both at 10% headroom.
const spendBudgets = `policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 600, spend_per_day: 20, zone: America/Los_Angeles}
    headroom: 0.1
  - provider: openai
    model: gpt-4o
    tenant: acme
    limits: {spend_per_month: "5.00", zone: America/Los_Angeles}
    headroom: 0.1
`

// The spend gauges report each money budget in currency units, per key
// and period, with the time to its reset; the bucket gauges keep to the
// axes counted in units.
func TestSpendGaugesReportEachMoneyBudget(t *testing.T) {
	b, err := ParsePolicies([]byte(spendBudgets))
	require.NoError(t, err)
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	now := time.Date(2026, 12, 31, 18, 0, 0, 0, la) // 6 h before both periods end
	store, err := memory.New(b.Policies, memory.Options{Clock: quotatest.NewClock(now)})
	require.NoError(t, err)
	ctx := context.Background()
	account := quota.Key{Provider: "openai", Model: "gpt-4o"}
	acme := account
	acme.Tenant = "acme"
	for i, k := range []quota.Key{account, acme, acme} {
		d, err := store.Reserve(ctx, quota.Reservation{Key: k, Ticket: fmt.Sprintf("call-%d", i),
			Cost: quota.Cost{Requests: 1, Tokens: 1000, Spend: int64(quota.Dollars(1.25))}})
		require.NoError(t, err)
		require.Equal(t, quota.Granted, d.Outcome, "call %d", i)
	}

	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	require.NoError(t, registerGauges(meter, store, b))
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))

	require.Equal(t, map[string]float64{
		"openai/default/gpt-4o day":        18,  // 20 less 10%
		"openai/default/gpt-4o/acme month": 4.5, // 5 less 10%
	}, floatGaugePoints(t, rm, MetricSpendLimit, "key", "period"))
	left := floatGaugePoints(t, rm, MetricSpendRemaining, "key", "period")
	require.InDelta(t, 18-3*1.25, left["openai/default/gpt-4o day"], 1e-9, "the account is charged its tenants' calls too")
	require.InDelta(t, 4.5-2*1.25, left["openai/default/gpt-4o/acme month"], 1e-9)
	require.Len(t, left, 2)
	require.Equal(t, map[string]float64{
		"openai/default/gpt-4o day":        (6 * time.Hour).Seconds(),
		"openai/default/gpt-4o/acme month": (6 * time.Hour).Seconds(),
	}, floatGaugePoints(t, rm, MetricSpendReset, "key", "period"))
	require.Equal(t, map[string]int64{"openai/default/gpt-4o requests": 600 - 60},
		gaugePoints(t, rm, MetricBucketCapacity, "key", "axis"), "money is not reported as units on the bucket gauges")
}

// The spend gauges carry the names the README documents on /metrics.
func TestSpendGaugesPrometheusNames(t *testing.T) {
	b, err := ParsePolicies([]byte(spendBudgets))
	require.NoError(t, err)
	store, err := memory.New(b.Policies, memory.Options{})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	require.NoError(t, err)
	require.NoError(t, registerGauges(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)).Meter("tollgate"), store, b))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	metrics := rec.Body.String()
	for _, series := range []string{
		`tollgate_spend_limit\{key="openai/default/gpt-4o",[^}]*period="day"[^}]*\} 18$`,
		`tollgate_spend_limit\{key="openai/default/gpt-4o/acme",[^}]*period="month"[^}]*\} 4\.5$`,
		`tollgate_spend_remaining\{key="openai/default/gpt-4o",[^}]*period="day"[^}]*\} 18$`,
		`tollgate_spend_reset_seconds\{key="openai/default/gpt-4o/acme",[^}]*period="month"[^}]*\} \d`,
	} {
		require.Regexp(t, `(?m)^`+series, metrics)
	}
}

// floatGaugePoints is gaugePoints for a float64 gauge.
func floatGaugePoints(t *testing.T, rm metricdata.ResourceMetrics, name string, attrs ...string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			g, ok := m.Data.(metricdata.Gauge[float64])
			require.True(t, ok, "%s is a %T", name, m.Data)
			for _, dp := range g.DataPoints {
				var ids []string
				for _, a := range attrs {
					v, ok := dp.Attributes.Value(attribute.Key(a))
					require.True(t, ok, "%s has attribute %s", name, a)
					ids = append(ids, v.AsString())
				}
				id := strings.Join(ids, " ")
				_, dup := out[id]
				require.False(t, dup, "%s reports %q once per collection", name, id)
				out[id] = dp.Value
			}
		}
	}
	return out
}

// The margin gauge reports each bucket axis's margin: a 429 that named the
// request axis cuts that axis's, and the token axis's stays as it was.
func TestMarginGaugeReportsEachAxis(t *testing.T) {
	b, err := ParsePolicies([]byte(`policies:
  - provider: openai
    model: gpt-4o
    limits: {requests_per_minute: 600, tokens_per_minute: 60000}
`))
	require.NoError(t, err)
	store, err := memory.New(b.Policies, memory.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	k := quota.Key{Provider: "openai", Model: "gpt-4o"}
	require.NoError(t, store.Pause(ctx, k, time.Second, quota.RateLimitedOn(quota.Requests)))

	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")
	require.NoError(t, registerGauges(meter, store, b))
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	cut := storekit.Cut(storekit.NoMargin)
	require.Equal(t, map[string]float64{
		"openai/default/gpt-4o requests burst": cut.Burst, "openai/default/gpt-4o requests rate": cut.Rate,
		"openai/default/gpt-4o requests refused": cut.Refused,
		"openai/default/gpt-4o tokens burst":     1, "openai/default/gpt-4o tokens rate": 1, "openai/default/gpt-4o tokens refused": 0,
	}, floatGaugePoints(t, rm, MetricMargin, "key", "axis", "part"))
}
