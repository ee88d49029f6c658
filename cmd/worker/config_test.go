package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/worker"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(nil, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Equal(t, defaultEmbeddedAddress, cfg.EmbeddedAddress)
	require.Equal(t, defaultUIAddress, cfg.UIAddress)
	require.Equal(t, defaultSimAddress, cfg.SimAddress)
	require.Equal(t, worker.DefaultTaskQueue, cfg.TaskQueue, "the library's defaults are filled in too")
	require.True(t, cfg.simulated())
}

func TestLoadConfigReadsTheCommandsSettings(t *testing.T) {
	cfg, err := loadConfig([]string{"-temporal-ui-address", "off", "-sim-address", "127.0.0.1:8089"},
		envOf(map[string]string{"TEMPORAL_UI_ADDRESS": "0.0.0.0:8233", "TEMPORAL_EMBEDDED_ADDRESS": "127.0.0.1:0", "OPENAI_API_KEY": "sk-1"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "off", cfg.UIAddress, "the flag wins")
	require.Equal(t, "127.0.0.1:0", cfg.EmbeddedAddress)
	require.Equal(t, "127.0.0.1:8089", cfg.SimAddress)
	require.False(t, cfg.simulated())
}

// Each wrong setting of the command's own gives its own error, naming the
// variable, its flag and the fix, like the library's.
func TestLoadConfigRejectsEachBadSetting(t *testing.T) {
	dir := t.TempDir()
	badSim := filepath.Join(dir, "sim.yaml")
	require.NoError(t, os.WriteFile(badSim, []byte("models:\n  - provider: mistral\n    name: mistral-large\n"), 0o600))
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		field   string
		flag    string
		problem string
		fix     string
	}{
		{"embedded address with a bad port", nil, []string{"-temporal-embedded-address", "127.0.0.1:99999"},
			"TEMPORAL_EMBEDDED_ADDRESS", "-temporal-embedded-address", "is not host:port", "127.0.0.1:7233"},
		{"ui address without a port", map[string]string{"TEMPORAL_UI_ADDRESS": "localhost"}, nil,
			"TEMPORAL_UI_ADDRESS", "-temporal-ui-address", "is not host:port", `or "off"`},
		{"ui address with a bad port", nil, []string{"-temporal-ui-address", ":http"},
			"TEMPORAL_UI_ADDRESS", "-temporal-ui-address", "is not host:port", "127.0.0.1:8233"},
		{"sim address without port", map[string]string{"SIM_ADDRESS": "localhost"}, nil,
			"SIM_ADDRESS", "-sim-address", "is not host:port", "127.0.0.1"},
		{"sim config missing", map[string]string{"SIM_CONFIG": filepath.Join(dir, "nope.yaml")}, nil,
			"SIM_CONFIG", "-sim-config", "cannot be used", "check the path"},
		{"sim config with a bad model", nil, []string{"-sim-config", badSim},
			"SIM_CONFIG", "-sim-config", "cannot be used", "models[0].provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(tc.args, envOf(tc.env), io.Discard)
			var ce *worker.ConfigError
			require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
			require.Equal(t, tc.field, ce.Env, "error: %v", err)
			msg := err.Error()
			require.Contains(t, msg, tc.field+" ("+tc.flag+")")
			require.Contains(t, msg, tc.problem)
			require.Contains(t, msg, tc.fix)
		})
	}
}
