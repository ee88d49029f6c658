package worker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testnet"
)

// Health asks the endpoint a worker's telemetry serves, on loopback when
// the worker listens on every interface.
func TestHealthAsksTheMetricsEndpoint(t *testing.T) {
	addr := testnet.FreeAddr(t)
	cfg := Config{MetricsAddr: addr}
	err := Health(context.Background(), cfg)
	require.ErrorContains(t, err, "no worker answers on METRICS_ADDR (-metrics-addr) "+addr)

	tel, err := newTelemetry(context.Background(), Config{MetricsAddr: addr}.WithDefaults(), quietLogger())
	require.NoError(t, err)
	defer tel.shutdown(context.Background())
	require.NoError(t, Health(context.Background(), cfg))

	_, port, _ := strings.Cut(addr, ":")
	require.NoError(t, Health(context.Background(), Config{MetricsAddr: "0.0.0.0:" + port}), "a wildcard host is asked on loopback")
}

func TestHealthNeedsAKnownMetricsAddress(t *testing.T) {
	for _, tc := range []struct {
		name, addr, problem string
	}{
		{"off", "off", "turns off the endpoint"},
		{"port picked at start", "127.0.0.1:0", "port the worker picks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Health(context.Background(), Config{MetricsAddr: tc.addr})
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
			require.Equal(t, "METRICS_ADDR", ce.Env)
			require.ErrorContains(t, err, tc.problem)
		})
	}
}
