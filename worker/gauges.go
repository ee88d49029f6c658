package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// Bucket-level gauges, read from Store.Snapshot at each collection.
const (
	// MetricBucketAvailable is what each key's axis could charge now
	// (negative while queued reservations are outstanding).
	MetricBucketAvailable = "tollgate.bucket.available"
	// MetricBucketCapacity is each key's axis's effective capacity.
	MetricBucketCapacity = "tollgate.bucket.capacity"
	// MetricKeyPaused is 1 while a key is paused (a provider's Retry-After
	// or a spend cap), 0 otherwise.
	MetricKeyPaused = "tollgate.key.paused"
	// MetricEstimateRatio is each key's learned estimate ratio (what its
	// provider counts per estimated prompt token) on each axis it scales:
	// tollgate_estimate_ratio{key,axis} in Prometheus.
	MetricEstimateRatio = "tollgate.estimate.ratio"
	// MetricBucketBurst is how much of each key's bucket axis may start at
	// once (its burst, after the learned margin):
	// tollgate_bucket_burst{key,axis}.
	MetricBucketBurst = "tollgate.bucket.burst"
	// MetricMargin is what each key's bucket axis learned of its
	// provider's limiter (quota.AxisLevel.Margin): the multiple of its
	// default burst it lets go at once (part=burst, grown by calls that
	// went well, cut by 429s), the share of its rate it uses (part=rate,
	// in (0, 1]), and the burst multiple its provider last refused
	// (part=refused, 0 before any 429): tollgate_margin{key,axis,part}.
	MetricMargin = "tollgate.margin"
	// MetricLineQueued is how many calls wait in each account's line for
	// capacity, per tenant: tollgate_line_queued{key,tenant} in
	// Prometheus, key naming the account and tenant as Tollgate's other
	// metrics do (a tenant the policies file names, interceptor.OtherTenants
	// for every other tenant together, interceptor.NoTenant for untenanted
	// calls).
	MetricLineQueued = "tollgate.line.queued"
	// MetricLineCost is what those calls were charged, per tenant, on each
	// resource the account's policy limits (requests, tokens, input_tokens,
	// output_tokens): tollgate_line_cost{key,tenant,axis}.
	MetricLineCost = "tollgate.line.cost"
	// MetricSpendLimit is each money budget's limit for its period (after
	// headroom), in the price table's currency (Money/1e6):
	// tollgate_spend_limit{key,period} in Prometheus, period "day" or
	// "month", key the policy's key (an account's, or a tenant's own).
	MetricSpendLimit = "tollgate.spend.limit"
	// MetricSpendRemaining is what each money budget has left of its
	// period, in the same currency units: tollgate_spend_remaining{key,period}.
	MetricSpendRemaining = "tollgate.spend.remaining"
	// MetricSpendReset is the time until each money budget's period starts
	// again, in seconds: tollgate_spend_reset_seconds{key,period}.
	MetricSpendReset = "tollgate.spend.reset"
)

// spendPeriod is the period label of a money budget's axis.
func spendPeriod(a quota.Axis) string {
	if a == quota.SpendPerMonth {
		return "month"
	}
	return "day"
}

// registerGauges reports every policy key's levels (its money budgets on
// the spend gauges, its other axes on the bucket gauges), and each
// account's line per tenant, through meter. A key whose snapshot fails (Redis down) is
// skipped for that collection.
func registerGauges(meter metric.Meter, store quota.Store, b Budgets) error {
	keys := b.Policies.Keys()
	lines := newLineLabels(b)
	avail, err := meter.Float64ObservableGauge(MetricBucketAvailable,
		metric.WithDescription("Units each key's axis could charge now; negative while reservations are queued."))
	if err != nil {
		return err
	}
	capacity, err := meter.Int64ObservableGauge(MetricBucketCapacity,
		metric.WithDescription("Each key's axis's effective capacity (after headroom)."))
	if err != nil {
		return err
	}
	paused, err := meter.Int64ObservableGauge(MetricKeyPaused,
		metric.WithDescription("1 while the key is paused by a provider's Retry-After or a spend cap."))
	if err != nil {
		return err
	}
	ratio, err := meter.Float64ObservableGauge(MetricEstimateRatio,
		metric.WithDescription("What each key's provider counts per estimated prompt token, as learned, on each axis it scales (1: as estimated)."))
	if err != nil {
		return err
	}
	burst, err := meter.Float64ObservableGauge(MetricBucketBurst,
		metric.WithDescription("Units of each key's bucket axis that may start at once: its burst, after the learned margin."))
	if err != nil {
		return err
	}
	margin, err := meter.Float64ObservableGauge(MetricMargin,
		metric.WithDescription("What each key learned of its provider's limiter: the multiple of its bursts (part=burst) and share of its rates (part=rate) it uses, and the burst multiple last refused (part=refused)."))
	if err != nil {
		return err
	}
	queued, err := meter.Int64ObservableGauge(MetricLineQueued,
		metric.WithDescription("Calls waiting in each account's line for capacity, per tenant (named, other or none)."))
	if err != nil {
		return err
	}
	lineCost, err := meter.Int64ObservableGauge(MetricLineCost,
		metric.WithDescription("What the calls waiting in each account's line were charged, per tenant and resource."))
	if err != nil {
		return err
	}
	spendLimit, err := meter.Float64ObservableGauge(MetricSpendLimit,
		metric.WithDescription("Each money budget's limit for its period (after headroom), in the price table's currency."))
	if err != nil {
		return err
	}
	spendLeft, err := meter.Float64ObservableGauge(MetricSpendRemaining,
		metric.WithDescription("What each money budget has left of its period, in the price table's currency."))
	if err != nil {
		return err
	}
	spendReset, err := meter.Float64ObservableGauge(MetricSpendReset, metric.WithUnit("s"),
		metric.WithDescription("Time until each money budget's period (day or month, in its zone) starts again."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		for _, k := range keys {
			snap, err := store.Snapshot(ctx, k)
			if err != nil {
				continue
			}
			key := attribute.String("key", k.String())
			for _, l := range snap.Axes {
				if l.Axis.Spend() { // money, not units: the spend gauges
					attrs := metric.WithAttributes(key, attribute.String("period", spendPeriod(l.Axis)))
					o.ObserveFloat64(spendLimit, float64(l.Capacity)/1e6, attrs)
					o.ObserveFloat64(spendLeft, l.Available/1e6, attrs)
					o.ObserveFloat64(spendReset, max(l.ResetAt.Sub(snap.At), 0).Seconds(), attrs)
					continue
				}
				attrs := metric.WithAttributes(key, attribute.String("axis", l.Axis.String()))
				o.ObserveFloat64(avail, l.Available, attrs)
				o.ObserveInt64(capacity, l.Capacity, attrs)
				if l.Axis.Calibrated() {
					o.ObserveFloat64(ratio, snap.EstimateRatio, attrs)
				}
				if l.Axis.Kind() == quota.Bucket {
					o.ObserveFloat64(burst, l.Burst, attrs)
					// A tenant's own budget starts its calls at its
					// account's gates: it reports the account's margin.
					m := l.Margin
					if m == (quota.Margin{}) {
						m = snap.Margin
					}
					m = storekit.OrNone(m)
					axis := attribute.String("axis", l.Axis.String())
					o.ObserveFloat64(margin, m.Burst, metric.WithAttributes(key, axis, attribute.String("part", "burst")))
					o.ObserveFloat64(margin, m.Rate, metric.WithAttributes(key, axis, attribute.String("part", "rate")))
					o.ObserveFloat64(margin, m.Refused, metric.WithAttributes(key, axis, attribute.String("part", "refused")))
				}
			}
			var p int64
			if snap.PausedUntil.After(snap.At) {
				p = 1
			}
			o.ObserveInt64(paused, p, metric.WithAttributes(key))
			if l, ok := lines[k]; ok {
				l.observe(o, queued, lineCost, snap.Line)
			}
		}
		return nil
	}, avail, capacity, paused, ratio, burst, margin, queued, lineCost, spendLimit, spendLeft, spendReset)
	return err
}

// lineLabels is what the line gauges report for one line: the budget the
// line belongs to (an account's, or a tenant's own standing alone), its
// tenants' label values and the resources its policy limits.
type lineLabels struct {
	key attribute.KeyValue
	// named maps a tenant to its label value; a tenant not in it is
	// interceptor.OtherTenants.
	named map[string]string
	// always are the label values reported even when nothing of theirs
	// waits, so a line that empties reads 0 rather than vanishing.
	always    []string
	resources []quota.Axis
}

// newLineLabels returns the line gauges' labels for every key whose
// snapshot lists a whole line: each account-wide key, and each tenant's key
// whose account has no policy. A tenant nested in its account's budget is
// reported in its account's line, once.
func newLineLabels(b Budgets) map[quota.Key]*lineLabels {
	named := map[string]string{"": interceptor.NoTenant}
	for _, t := range b.Tenants() {
		named[t] = t
	}
	out := map[quota.Key]*lineLabels{}
	for _, k := range b.Policies.Keys() {
		if _, _, nested := b.Policies.Account(k); nested {
			continue
		}
		_, p, _ := b.Policies.Lookup(k)
		l := &lineLabels{key: attribute.String("key", k.WithoutTenant().String()), named: named, resources: costResources(p)}
		if k.Tenant != "" {
			l.always = []string{k.Tenant}
		} else {
			l.always = []string{interceptor.NoTenant}
			for name := range p.TenantWeights {
				l.always = append(l.always, name)
			}
			for _, t := range b.Policies.Keys() {
				if t.Tenant != "" && t.WithoutTenant() == k {
					l.always = append(l.always, t.Tenant)
				}
			}
		}
		out[k] = l
	}
	return out
}

// costResources returns the parts of a call's cost that p's limits charge,
// in quota.Axes order: Requests (requests a minute or a day), Tokens,
// InputTokens, OutputTokens.
func costResources(p quota.Policy) []quota.Axis {
	var out []quota.Axis
	for _, r := range [...]struct {
		resource quota.Axis
		axes     []quota.Axis
	}{
		{quota.Requests, []quota.Axis{quota.Requests, quota.RequestsPerDay}},
		{quota.Tokens, []quota.Axis{quota.Tokens, quota.TokensPerDay}},
		{quota.InputTokens, []quota.Axis{quota.InputTokens}},
		{quota.OutputTokens, []quota.Axis{quota.OutputTokens}},
	} {
		for _, a := range r.axes {
			if _, ok := p.Limit(a); ok {
				out = append(out, r.resource)
				break
			}
		}
	}
	return out
}

// observe reports line, summed per label value.
func (l *lineLabels) observe(o metric.Observer, queued, cost metric.Int64ObservableGauge, line []quota.TenantLine) {
	type sum struct {
		tickets int64
		cost    quota.Cost
	}
	sums := make(map[string]*sum, len(l.always)+1)
	order := make([]string, 0, len(l.always)+1)
	at := func(label string) *sum {
		s, ok := sums[label]
		if !ok {
			s = &sum{}
			sums[label] = s
			order = append(order, label)
		}
		return s
	}
	for _, label := range l.always {
		at(label)
	}
	for _, tl := range line {
		label, ok := l.named[tl.Tenant]
		if !ok {
			label = interceptor.OtherTenants
		}
		s := at(label)
		s.tickets += int64(tl.Tickets)
		s.cost.Requests += tl.Cost.Requests
		s.cost.Tokens += tl.Cost.Tokens
		s.cost.InputTokens += tl.Cost.InputTokens
		s.cost.OutputTokens += tl.Cost.OutputTokens
	}
	for _, label := range order {
		s := sums[label]
		tenant := attribute.String("tenant", label)
		o.ObserveInt64(queued, s.tickets, metric.WithAttributes(l.key, tenant))
		for _, r := range l.resources {
			o.ObserveInt64(cost, s.cost.On(r), metric.WithAttributes(l.key, tenant, attribute.String("axis", r.String())))
		}
	}
}
