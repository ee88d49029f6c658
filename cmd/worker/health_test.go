package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testnet"
	"github.com/tollgate/tollgate/worker"
)

// health asks the endpoint a worker's telemetry serves, on loopback when
// the worker listens on every interface. (TestServeOnTheEmbeddedDefaults asks
// a real worker's.)
func TestHealthAsksTheMetricsEndpoint(t *testing.T) {
	addr := testnet.FreeAddr(t)
	cfg := worker.Config{MetricsAddr: addr}
	err := health(context.Background(), cfg)
	require.ErrorContains(t, err, "no worker answers on METRICS_ADDR (-metrics-addr) "+addr)

	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "up 1\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go srv.Serve(l)
	defer srv.Close()
	require.NoError(t, health(context.Background(), cfg))

	_, port, _ := strings.Cut(addr, ":")
	require.NoError(t, health(context.Background(), worker.Config{MetricsAddr: "0.0.0.0:" + port}), "a wildcard host is asked on loopback")
}

func TestHealthNeedsAKnownMetricsAddress(t *testing.T) {
	for _, tc := range []struct {
		name, addr, problem string
	}{
		{"off", "off", "turns off the endpoint"},
		{"port picked at start", "127.0.0.1:0", "port the worker picks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := health(context.Background(), worker.Config{MetricsAddr: tc.addr})
			var ce *worker.ConfigError
			require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
			require.Equal(t, "METRICS_ADDR", ce.Env)
			require.ErrorContains(t, err, tc.problem)
		})
	}
}
