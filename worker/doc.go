// Package worker wires Tollgate into a Temporal worker from configuration,
// for a service's own main: it reads a Config from environment variables and
// flags (LoadConfig), reads a policies file into Budgets (LoadPolicies), and
// Start builds the rest on them: the Temporal client, the quota store
// (process memory, or Redis behind the STORE_FAILURE policy), the
// interceptor, the LLM activities on the providers whose keys are set, the
// agent workflows, and OpenTelemetry (a Prometheus /metrics endpoint, the
// SDK's metrics handler and tracing interceptor, and an OTLP trace exporter
// when configured). Run does all of it until its context is done.
//
// It imports no Temporal server, simulator or terminal view: cmd/worker, the
// application built on it, owns those (an embedded server and its Web UI
// when TEMPORAL_ADDRESS is empty, the simulated providers when no API key is
// set, the demo), and reads their settings through LoadConfig's extra
// Settings. Read that command's app.go for how it adds them.
package worker
