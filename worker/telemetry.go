package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
)

// telemetry is the worker's OpenTelemetry: one meter provider exported to
// Prometheus (Tollgate's metrics, the Temporal SDK's and the bucket gauges
// share it), and a tracer provider exporting over OTLP when configured.
type telemetry struct {
	meters  *sdkmetric.MeterProvider
	tracers *sdktrace.TracerProvider // nil without OTLP
	tracer  trace.Tracer
	server  *http.Server // nil with METRICS_ADDR=off
	addr    string
}

func newTelemetry(ctx context.Context, cfg Config, logger *slog.Logger) (*telemetry, error) {
	res := resource.NewSchemaless(attribute.String("service.name", "tollgate-worker"))
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("worker: prometheus exporter: %w", err)
	}
	t := &telemetry{meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))}
	t.tracer = tracenoop.NewTracerProvider().Tracer("temporal-sdk-go")
	if cfg.OTLPEndpoint != "" {
		u, _ := url.Parse(cfg.OTLPEndpoint) // Validate checked it
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		te, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			t.shutdown(context.Background())
			return nil, fmt.Errorf("worker: OTLP trace exporter for %s: %w", cfg.OTLPEndpoint, err)
		}
		t.tracers = sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
		t.tracer = t.tracers.Tracer("temporal-sdk-go")
		logger.Info("traces: exported over OTLP/gRPC", "endpoint", cfg.OTLPEndpoint)
	} else {
		logger.Info("traces: not exported (set OTEL_EXPORTER_OTLP_ENDPOINT to send them to a collector)")
	}
	if cfg.MetricsAddr != "off" {
		l, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			t.shutdown(context.Background())
			return nil, fmt.Errorf("worker: metrics: listen on %s: %w (set METRICS_ADDR to a free address, or off)", cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		t.addr = l.Addr().String()
		go func() {
			if err := t.server.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server stopped", "error", err)
			}
		}()
		logger.Info("metrics: Prometheus endpoint", "url", "http://"+t.addr+"/metrics")
	}
	return t, nil
}

// meter returns a Meter of the shared provider.
func (t *telemetry) meter(name string) metric.Meter { return t.meters.Meter(name) }

// sdkMetrics returns the Temporal SDK's metrics handler on the shared
// provider; a meter error is logged, never a panic.
func (t *telemetry) sdkMetrics(logger *slog.Logger) temporalotel.MetricsHandler {
	return temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                t.meter("temporal-sdk-go"),
		OnError:              func(err error) { logger.Warn("temporal sdk metric", "error", err) },
		UseMonotonicCounters: true,
	})
}

// tracing returns the SDK's tracing interceptor on the worker's tracer,
// propagating W3C trace context through workflow and activity headers.
func (t *telemetry) tracing() (sdkinterceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            t.tracer,
		TextMapPropagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	})
}

func (t *telemetry) shutdown(ctx context.Context) {
	if t.server != nil {
		_ = t.server.Shutdown(ctx)
	}
	if t.tracers != nil {
		_ = t.tracers.Shutdown(ctx)
	}
	_ = t.meters.Shutdown(ctx)
}
