// Package webui serves the Temporal Web UI (github.com/temporalio/ui-server)
// beside cmd/worker's embedded Temporal server, as `temporal server
// start-dev` does: the UI's pages and its HTTP API, which calls the
// server's gRPC frontend. It is the command's, like the embedded server: the
// UI's assets make a binary tens of megabytes larger, so no library package
// imports it.
package webui
