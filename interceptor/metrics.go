package interceptor

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/tollgate/quota"
)

// Stats counts what the interceptor did since it was built, in this process.
// The same events are exported as OpenTelemetry metrics (see New).
type Stats struct {
	// Admitted: governed attempts granted and run.
	Admitted int64
	// Queued: attempts ended with QuotaRefused while holding a place in line.
	Queued int64
	// Refused: attempts ended with QuotaRefused without a place (paused,
	// daily limit, past the line's bound). A store that cannot be reached
	// ends attempts with StoreUnavailable, counted apart from these.
	Refused int64
	// WaitedInWorkflow: calls whose workflow slept until their place in
	// line matured before scheduling them (Options.WaitInWorkflow).
	WaitedInWorkflow int64
	// ProviderRateLimited: provider 429 and overload answers.
	ProviderRateLimited int64
	// Escalations: RateLimitEscalation errors returned.
	Escalations int64
	// Fallbacks: FallbackWorkflow children started (not counted on replay).
	Fallbacks int64
	// SpendCapped: spend-cap and daily-quota answers.
	SpendCapped int64
	// Transient: transport failures and 5xx answers, and lost attempts.
	Transient int64
	// LostAttempts: attempts found lost by the next attempt (their worker
	// died or stopped heartbeating, and the server timed them out), counted
	// against the transient budget.
	LostAttempts int64
	// Ungoverned: governed-looking attempts run without admission because
	// the store has no policy for their key.
	Ungoverned int64
	// BudgetSpent: calls refused because a money budget was spent (failed
	// with BudgetExhausted, or escalated when it falls back).
	BudgetSpent int64
	// Spend: the money settled on priced calls, in quota.Money.
	Spend quota.Money
}

type counters struct {
	admitted, queued, refused, waitedInWorkflow, rateLimited, escalations, fallbacks, spendCapped, transient, lost, ungoverned, budgetSpent, spend atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Admitted:            c.admitted.Load(),
		Queued:              c.queued.Load(),
		WaitedInWorkflow:    c.waitedInWorkflow.Load(),
		Refused:             c.refused.Load(),
		ProviderRateLimited: c.rateLimited.Load(),
		Escalations:         c.escalations.Load(),
		Fallbacks:           c.fallbacks.Load(),
		SpendCapped:         c.spendCapped.Load(),
		Transient:           c.transient.Load(),
		LostAttempts:        c.lost.Load(),
		Ungoverned:          c.ungoverned.Load(),
		BudgetSpent:         c.budgetSpent.Load(),
		Spend:               quota.Money(c.spend.Load()),
	}
}

// Metric names, as exported through the Meter (a Prometheus exporter turns
// dots into underscores and adds unit suffixes).
const (
	MetricAdmissions   = "tollgate.admissions"
	MetricRetryAfter   = "tollgate.retry_after"
	MetricProvider     = "tollgate.provider.responses"
	MetricEscalations  = "tollgate.escalations"
	MetricFallbacks    = "tollgate.fallbacks"
	MetricSpendCaps    = "tollgate.spend_caps"
	MetricStoreLatency = "tollgate.store.latency"
	MetricPoolCalls    = "tollgate.pool.calls"
	MetricSpendSettled = "tollgate.spend.settled"
	MetricSpendRefused = "tollgate.spend.refused"
)

// Values of the tenant attribute beside the tenants named in
// Options.Tenants.
const (
	// NoTenant is the tenant attribute of untenanted calls.
	NoTenant = "none"
	// OtherTenants is the tenant attribute of every tenant not named in
	// Options.Tenants.
	OtherTenants = "other"
)

// UngovernedKey is the key attribute of every call run ungoverned (its key
// has no policy), whatever its key: such keys are the callers', not the
// policies', so naming each would make a series per key. The warning
// logged once per key names them.
const UngovernedKey = "ungoverned"

// instruments are Tollgate's metrics. With no Meter configured they record
// nothing and cost nothing: no attribute is built on the admission path.
type instruments struct {
	on           bool
	tenants      map[string]bool // named in the tenant attribute
	admissions   metric.Int64Counter
	retryAfter   metric.Float64Histogram
	provider     metric.Int64Counter
	escalations  metric.Int64Counter
	fallbacks    metric.Int64Counter
	spendCaps    metric.Int64Counter
	storeLatency metric.Float64Histogram
	poolCalls    metric.Int64Counter
	spendSettled metric.Int64Counter
	budgetsSpent metric.Int64Counter
}

func newInstruments(m metric.Meter, on bool, tenants []string) (*instruments, error) {
	ins := instruments{on: on, tenants: make(map[string]bool, len(tenants))}
	for _, t := range tenants {
		ins.tenants[t] = true
	}
	var err error
	if ins.admissions, err = m.Int64Counter(MetricAdmissions,
		metric.WithDescription("Governed attempts by decision (granted, queued, refused; ungoverned when the key has no policy), reason and binding axis.")); err != nil {
		return nil, err
	}
	if ins.retryAfter, err = m.Float64Histogram(MetricRetryAfter, metric.WithUnit("s"),
		metric.WithDescription("Retry delays handed to Temporal, by source (quota or provider)."),
		metric.WithExplicitBucketBoundaries(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)); err != nil {
		return nil, err
	}
	if ins.provider, err = m.Int64Counter(MetricProvider,
		metric.WithDescription("Provider answers by class (ok, rate_limited, overloaded, spend_cap, …; lost: an attempt lost with its worker before it answered).")); err != nil {
		return nil, err
	}
	if ins.escalations, err = m.Int64Counter(MetricEscalations,
		metric.WithDescription("Calls escalated to a backup model.")); err != nil {
		return nil, err
	}
	if ins.fallbacks, err = m.Int64Counter(MetricFallbacks,
		metric.WithDescription("FallbackWorkflow children started, by the model escalated from (not counted on replay).")); err != nil {
		return nil, err
	}
	if ins.spendCaps, err = m.Int64Counter(MetricSpendCaps,
		metric.WithDescription("Spend-cap and daily-quota answers; the key is paused until its reset.")); err != nil {
		return nil, err
	}
	if ins.storeLatency, err = m.Float64Histogram(MetricStoreLatency, metric.WithUnit("s"),
		metric.WithDescription("Quota store round trips, by operation."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1)); err != nil {
		return nil, err
	}
	if ins.poolCalls, err = m.Int64Counter(MetricPoolCalls,
		metric.WithDescription("Calls on a pool's key run, by pool and by the member that served them.")); err != nil {
		return nil, err
	}
	if ins.spendSettled, err = m.Int64Counter(MetricSpendSettled, metric.WithUnit("{millionth}"),
		metric.WithDescription("Money settled on priced calls (quota.Money: millionths of the price table's currency), by key.")); err != nil {
		return nil, err
	}
	if ins.budgetsSpent, err = m.Int64Counter(MetricSpendRefused,
		metric.WithDescription("Calls refused by a spent money budget, by key and the budget's axis (class: spend_per_day, spend_per_month).")); err != nil {
		return nil, err
	}
	return &ins, nil
}

// served counts a pool call run on member.
func (ins *instruments) served(ctx context.Context, pool, member quota.Key) {
	if !ins.on {
		return
	}
	key, tenant := ins.keyAttrs(pool)
	ins.poolCalls.Add(ctx, 1, metric.WithAttributes(key, tenant, attribute.String("member", member.WithoutTenant().String())))
}

// keyAttrs returns the attributes naming k: its account as key, and its
// tenant as tenant (NoTenant, or OtherTenants for a tenant not named).
func (ins *instruments) keyAttrs(k quota.Key) (key, tenant attribute.KeyValue) {
	t := NoTenant
	switch {
	case k.Tenant == "":
	case ins.tenants[k.Tenant]:
		t = k.Tenant
	default:
		t = OtherTenants
	}
	return attribute.String("key", k.WithoutTenant().String()), attribute.String("tenant", t)
}

func (ins *instruments) admission(ctx context.Context, k quota.Key, d quota.Decision) {
	if !ins.on {
		return
	}
	key, tenant := ins.keyAttrs(k)
	ins.admissions.Add(ctx, 1, metric.WithAttributes(key, tenant,
		attribute.String("decision", d.Outcome.String()),
		attribute.String("reason", d.Reason.String()),
		attribute.String("axis", axisName(d.Axis))))
}

// ungoverned counts an attempt run without admission: its key has no
// policy. The key attribute is UngovernedKey, whatever the key.
func (ins *instruments) ungoverned(ctx context.Context, k quota.Key) {
	if !ins.on {
		return
	}
	_, tenant := ins.keyAttrs(k)
	ins.admissions.Add(ctx, 1, metric.WithAttributes(attribute.String("key", UngovernedKey), tenant,
		attribute.String("decision", "ungoverned"),
		attribute.String("reason", "no_policy"),
		attribute.String("axis", "none")))
}

func (ins *instruments) retry(ctx context.Context, k quota.Key, source string, d time.Duration) {
	if !ins.on {
		return
	}
	key, tenant := ins.keyAttrs(k)
	ins.retryAfter.Record(ctx, d.Seconds(), metric.WithAttributes(key, tenant, attribute.String("source", source)))
}

func (ins *instruments) store(ctx context.Context, op string, start time.Time) {
	if !ins.on {
		return
	}
	ins.storeLatency.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("op", op)))
}

func axisName(a quota.Axis) string {
	if a == 0 {
		return "none"
	}
	return a.String()
}

// count adds one to counter c for key k under label class (a provider
// answer's class, an escalation's reason).
func (ins *instruments) count(ctx context.Context, c metric.Int64Counter, k quota.Key, class string) {
	if !ins.on {
		return
	}
	key, tenant := ins.keyAttrs(k)
	c.Add(ctx, 1, metric.WithAttributes(key, tenant, attribute.String("class", class)))
}

// settled adds a priced call's settled spend on k.
func (ins *instruments) settled(ctx context.Context, k quota.Key, spend int64) {
	if !ins.on || spend <= 0 {
		return
	}
	key, tenant := ins.keyAttrs(k)
	ins.spendSettled.Add(ctx, spend, metric.WithAttributes(key, tenant))
}

// fallback counts a FallbackWorkflow child started for a call to from.
func (ins *instruments) fallback(from string) {
	if !ins.on {
		return
	}
	ins.fallbacks.Add(context.Background(), 1, metric.WithAttributes(attribute.String("from", from)))
}
