// Package worker wires Tollgate into a runnable Temporal worker: it reads a
// Config from environment variables and flags, then builds the Temporal
// client, the quota store, the interceptor, the activities and workflows, and
// OpenTelemetry (a Prometheus /metrics endpoint, the SDK's metrics handler and
// tracing interceptor, and an OTLP trace exporter when configured).
//
// Every missing piece has a local stand-in, so a fresh checkout runs with no
// setup: no TEMPORAL_ADDRESS starts an embedded Temporal server on loopback,
// no REDIS_URL uses the in-process memory store, and no provider API key
// starts llmsim (a simulated OpenAI and Anthropic) in-process with the
// profile DefaultSimConfig documents, or the one SIM_CONFIG names. Start logs
// which parts are real and which are embedded or simulated.
//
// cmd/worker is the binary built on it; read that package's main for the
// recipe, and Start for what it builds.
package worker
