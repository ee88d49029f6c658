package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/tollgate/quota"
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
)

// registerGauges reports every policy key's levels through meter. A key
// whose snapshot fails (Redis down) is skipped for that collection.
func registerGauges(meter metric.Meter, store quota.Store, keys []quota.Key) error {
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
				attrs := metric.WithAttributes(key, attribute.String("axis", l.Axis.String()))
				o.ObserveFloat64(avail, l.Available, attrs)
				o.ObserveInt64(capacity, l.Capacity, attrs)
				if l.Axis.Calibrated() {
					o.ObserveFloat64(ratio, snap.EstimateRatio, attrs)
				}
			}
			var p int64
			if snap.PausedUntil.After(snap.At) {
				p = 1
			}
			o.ObserveInt64(paused, p, metric.WithAttributes(key))
		}
		return nil
	}, avail, capacity, paused, ratio)
	return err
}
