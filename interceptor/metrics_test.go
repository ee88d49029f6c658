package interceptor

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/tollgate/quota"
)

// Metrics name the account as key, and a tenant by name only when it is
// one of Options.Tenants: a thousand other tenants share one series.
func TestTenantAttributeIsBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ins, err := newInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), true, []string{"acme"})
	require.NoError(t, err)
	ctx := context.Background()
	account := quota.Key{Provider: "openai", Model: "gpt-4o"}
	granted := quota.Decision{Outcome: quota.Granted}
	ins.admission(ctx, account, granted)
	for _, tenant := range []string{"acme", "acme", "beta", "gamma", "delta"} {
		k := account
		k.Tenant = tenant
		ins.admission(ctx, k, granted)
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricAdmissions {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				key, _ := dp.Attributes.Value("key")
				require.Equal(t, "openai/default/gpt-4o", key.AsString(), "the key attribute names the account")
				tenant, _ := dp.Attributes.Value("tenant")
				got[tenant.AsString()] += dp.Value
			}
		}
	}
	require.Equal(t, map[string]int64{NoTenant: 1, "acme": 2, OtherTenants: 3}, got)
}

// Calls on keys without a policy share one series per tenant value: the
// keys are the caller's, so a thousand of them must not make a thousand
// series.
func TestUngovernedKeysMakeBoundedSeries(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ins, err := newInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), true, []string{"acme"})
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 1000 {
		k := quota.Key{Provider: "provider-" + strconv.Itoa(i%7), Account: "acct-" + strconv.Itoa(i), Model: "model-" + strconv.Itoa(i)}
		if i%2 == 0 {
			k.Tenant = "tenant-" + strconv.Itoa(i)
		}
		ins.ungoverned(ctx, k)
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[attribute.Distinct]int64{}
	var keys []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricAdmissions {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				got[dp.Attributes.Equivalent()] += dp.Value
				key, _ := dp.Attributes.Value("key")
				keys = append(keys, key.AsString())
			}
		}
	}
	require.Equal(t, 2, len(got), "one series for untenanted calls, one for other tenants")
	var total int64
	for _, n := range got {
		total += n
	}
	require.Equal(t, int64(1000), total)
	require.Equal(t, []string{UngovernedKey, UngovernedKey}, keys)
}

// tollgate.pool.calls counts a pool's calls by the member that served them,
// tenants folded as in every metric: one series per pool, member and named
// tenant.
func TestPoolCallsCountTheMemberThatServed(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ins, err := newInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"), true, nil)
	require.NoError(t, err)
	ctx := context.Background()
	pool := quota.Key{Provider: "openai", Model: "gpt-4o"}
	east := quota.Key{Provider: "openai", Account: "east", Model: "gpt-4o"}
	west := quota.Key{Provider: "openai", Account: "west", Model: "gpt-4o"}
	for i := range 10 {
		p, m := pool, east
		if i%3 == 0 {
			m = west
		}
		p.Tenant, m.Tenant = "t"+strconv.Itoa(i), "t"+strconv.Itoa(i)
		ins.served(ctx, p, m)
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricPoolCalls {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				key, _ := dp.Attributes.Value("key")
				member, _ := dp.Attributes.Value("member")
				tenant, _ := dp.Attributes.Value("tenant")
				got[key.AsString()+" "+member.AsString()+" "+tenant.AsString()] += dp.Value
			}
		}
	}
	require.Equal(t, map[string]int64{
		"openai/default/gpt-4o openai/east/gpt-4o " + OtherTenants: 6,
		"openai/default/gpt-4o openai/west/gpt-4o " + OtherTenants: 4,
	}, got)
}
