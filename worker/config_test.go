package worker

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := LoadConfig(nil, envOf(nil), io.Discard)
	require.NoError(t, err)
	require.Equal(t, DefaultNamespace, cfg.Namespace)
	require.Equal(t, DefaultTaskQueue, cfg.TaskQueue)
	require.Equal(t, DefaultStoreFailure, cfg.StoreFailure)
	require.Equal(t, DefaultMetricsAddr, cfg.MetricsAddr)
	require.Equal(t, 1.0, cfg.StoreLocalShare)
	require.False(t, cfg.HasProviderKey())
	require.Empty(t, cfg.TemporalAddress, "empty, so that an application can tell it was not set")
}

func TestLoadConfigFlagsWinOverEnvironment(t *testing.T) {
	env := envOf(map[string]string{
		"TEMPORAL_ADDRESS": "temporal:7233",
		"TASK_QUEUE":       "from-env",
		"REDIS_URL":        "redis://redis:6379/0",
		"STORE_FAILURE":    "open",
		"OPENAI_API_KEY":   "sk-env",
		"WAIT_IN_WORKFLOW": "false",
	})
	cfg, err := LoadConfig([]string{"-task-queue", "from-flag", "-store-failure", "local", "-store-local-share", "0.5", "-wait-in-workflow", "true"}, env, io.Discard)
	require.NoError(t, err)
	require.True(t, cfg.WaitInWorkflow)
	require.Equal(t, "temporal:7233", cfg.TemporalAddress, "the environment applies where no flag is given")
	require.Equal(t, "from-flag", cfg.TaskQueue)
	require.Equal(t, "local", cfg.StoreFailure)
	require.Equal(t, 0.5, cfg.StoreLocalShare)
	require.Equal(t, "sk-env", cfg.OpenAIAPIKey)
	require.True(t, cfg.HasProviderKey())
}

// A Gemini key alone is a provider key, like any other provider's.
func TestLoadConfigGemini(t *testing.T) {
	cfg, err := LoadConfig(nil, envOf(map[string]string{"GEMINI_API_KEY": "AIza-env", "GEMINI_BASE_URL": "http://127.0.0.1:8089"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "AIza-env", cfg.GeminiAPIKey)
	require.Equal(t, "http://127.0.0.1:8089", cfg.GeminiBaseURL)
	require.True(t, cfg.HasProviderKey())
}

func TestLoadConfigHelp(t *testing.T) {
	_, err := LoadConfig([]string{"-h"}, envOf(nil), io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}

// Each wrong field gives its own error, naming the variable, its flag and
// the fix.
func TestLoadConfigRejectsEachBadField(t *testing.T) {
	dir := t.TempDir()
	badPolicies := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badPolicies, []byte("policies:\n  - provider: openai\n    limits: {requests_per_minute: 10}\n"), 0o600))

	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		field   string
		problem string
		fix     string
	}{
		{"temporal address without port", map[string]string{"TEMPORAL_ADDRESS": "temporal"}, nil,
			"TEMPORAL_ADDRESS", "is not host:port", "127.0.0.1:7233"},
		{"temporal address with a bad port", nil, []string{"-temporal-address", "127.0.0.1:99999"},
			"TEMPORAL_ADDRESS", "is not host:port", "127.0.0.1:7233"},
		{"namespace with spaces", map[string]string{"TEMPORAL_NAMESPACE": " prod"}, nil,
			"TEMPORAL_NAMESPACE", "spaces", "remove them"},
		{"task queue with spaces", nil, []string{"-task-queue", "q "},
			"TASK_QUEUE", "spaces", "remove them"},
		{"redis url of another scheme", map[string]string{"REDIS_URL": "http://redis:6379"}, nil,
			"REDIS_URL", "is not a Redis URL", "redis://localhost:6379/0"},
		{"redis url with a database that is not a number", map[string]string{"REDIS_URL": "redis://host:6379/abc"}, nil,
			"REDIS_URL", `invalid database number: "abc"`, "DB a database number"},
		{"redis url with an unknown option", nil, []string{"-redis-url", "redis://host:6379/0?dial_timout=1s"},
			"REDIS_URL", "unexpected option: dial_timout", "redis://localhost:6379/0"},
		{"unknown store failure policy", map[string]string{"REDIS_URL": "redis://r:6379", "STORE_FAILURE": "shut"}, nil,
			"STORE_FAILURE", "is not a failure policy", "closed, open or local"},
		{"store failure without redis", map[string]string{"STORE_FAILURE": "open"}, nil,
			"STORE_FAILURE", "REDIS_URL is empty", "set REDIS_URL"},
		{"local share out of range", map[string]string{"REDIS_URL": "redis://r:6379", "STORE_FAILURE": "local", "STORE_LOCAL_SHARE": "1.5"}, nil,
			"STORE_LOCAL_SHARE", "must be in (0, 1]", "0.5 for two replicas"},
		{"local share that is not a number", map[string]string{"STORE_LOCAL_SHARE": "half"}, nil,
			"STORE_LOCAL_SHARE", "is not a number", "decimal"},
		{"local share without local", map[string]string{"REDIS_URL": "redis://r:6379", "STORE_LOCAL_SHARE": "0.5"}, nil,
			"STORE_LOCAL_SHARE", "STORE_FAILURE is not local", "STORE_FAILURE=local"},
		{"policies file missing", map[string]string{"POLICIES": filepath.Join(dir, "nope.yaml")}, nil,
			"POLICIES", "cannot be used", "check the path"},
		{"policies file with a bad entry", map[string]string{"POLICIES": badPolicies}, nil,
			"POLICIES", "cannot be used", "policies[0].model"},
		{"openai base url without a key", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:8089/v1/"}, nil,
			"OPENAI_API_KEY", "OPENAI_BASE_URL is set", "set the key"},
		{"anthropic key with a trailing newline", map[string]string{"ANTHROPIC_API_KEY": "sk-ant\n"}, nil,
			"ANTHROPIC_API_KEY", "trailing spaces", "copy-paste"},
		{"gemini base url without a key", map[string]string{"GEMINI_BASE_URL": "http://127.0.0.1:8089"}, nil,
			"GEMINI_API_KEY", "GEMINI_BASE_URL is set", "set the key"},
		{"gemini key with a trailing space", nil, []string{"-gemini-api-key", "AIza "},
			"GEMINI_API_KEY", "trailing spaces", "copy-paste"},
		{"gemini base url not http", map[string]string{"GEMINI_API_KEY": "k", "GEMINI_BASE_URL": "generativelanguage.googleapis.com"}, nil,
			"GEMINI_BASE_URL", "is not an http(s) URL", "leave it empty"},
		{"wait in workflow not a boolean", map[string]string{"WAIT_IN_WORKFLOW": "yes please"}, nil,
			"WAIT_IN_WORKFLOW", "is not true or false", "use true or false"},
		{"openai organization without a key", map[string]string{"OPENAI_ORG_ID": "org-1"}, nil,
			"OPENAI_ORG_ID", "OPENAI_API_KEY is empty", "unset OPENAI_ORG_ID"},
		{"openai project with a trailing newline", map[string]string{"OPENAI_API_KEY": "k", "OPENAI_PROJECT_ID": "proj_1\n"}, nil,
			"OPENAI_PROJECT_ID", "control characters", "bare id"},
		{"openai base url not http", map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "api.openai.com/v1"}, nil,
			"OPENAI_BASE_URL", "is not an http(s) URL", "https://api.openai.com/v1/"},
		{"anthropic base url not http", nil, []string{"-anthropic-api-key", "k", "-anthropic-base-url", "ftp://x"},
			"ANTHROPIC_BASE_URL", "is not an http(s) URL", "leave it empty"},
		{"metrics address without port", map[string]string{"METRICS_ADDR": "9464"}, nil,
			"METRICS_ADDR", "is not host:port", `":9464"`},
		{"otlp endpoint without scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, nil,
			"OTEL_EXPORTER_OTLP_ENDPOINT", "is not an http(s) URL", "http://otel-collector:4317"},
		{"unknown log level", map[string]string{"LOG_LEVEL": "loud"}, nil,
			"LOG_LEVEL", "is not a log level", "debug, info, warn or error"},
		{"local share flag that is not a number", map[string]string{"REDIS_URL": "redis://r:6379", "STORE_FAILURE": "local"}, []string{"-store-local-share", "half"},
			"STORE_LOCAL_SHARE", "is not a number", "decimal"},
		{"flag without its value", nil, []string{"-task-queue"},
			"TASK_QUEUE", "has no value", "-task-queue=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(tc.args, envOf(tc.env), io.Discard)
			require.Error(t, err)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
			require.Equal(t, tc.field, ce.Env, "error: %v", err)
			msg := err.Error()
			require.Contains(t, msg, tc.field)
			require.Contains(t, msg, "-"+flagName(tc.field))
			require.Contains(t, msg, tc.problem)
			require.Contains(t, msg, tc.fix)
		})
	}
}

func TestConfigErrorsNeverShowKeys(t *testing.T) {
	_, err := LoadConfig(nil, envOf(map[string]string{"OPENAI_API_KEY": " sk-secret-123"}), io.Discard)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "sk-secret-123")

	_, err = LoadConfig(nil, envOf(map[string]string{"REDIS_URL": "ftp://user:hunter2@redis:6379"}), io.Discard)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
}

// A command line that does not parse is one *ConfigError, like a bad value:
// no usage text, and the fix in the message.
func TestCommandLineErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"misspelt flag", []string{"-temporal-adress", "x:1"},
			[]string{"worker: -temporal-adress is not a flag", "did you mean -temporal-address?", "-h"}},
		{"unknown flag", []string{"-verbose"},
			[]string{"worker: -verbose is not a flag", "run with -h for the flags"}},
		{"stray argument", []string{"extra"},
			[]string{`worker: argument "extra" is not a flag`, "the subcommand comes first"}},
		{"bad flag syntax", []string{"---task-queue", "q"},
			[]string{`worker: argument "---task-queue" is not a flag`, "-name=VALUE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := LoadConfig(tc.args, envOf(nil), &out)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "got %T: %v", err, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.NotContains(t, err.Error(), "\n", "one line")
			require.Empty(t, out.String(), "the flag package's usage text is not printed")
		})
	}
}

// A flag wins over its variable even when the variable's value is bad: only
// the value in force is parsed.
func TestFlagOverridesABadEnvironmentValue(t *testing.T) {
	env := envOf(map[string]string{"STORE_LOCAL_SHARE": "half", "REDIS_URL": "redis://r:6379/0", "STORE_FAILURE": "local"})
	cfg, err := LoadConfig([]string{"-store-local-share", "0.5"}, env, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 0.5, cfg.StoreLocalShare)

	cfg, err = LoadConfig([]string{"-log-level", "debug"}, envOf(map[string]string{"LOG_LEVEL": "loud"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "debug", cfg.LogLevel)

	cfg, err = LoadConfig([]string{"-redis-url=", "-store-failure=", "-store-local-share="}, env, io.Discard)
	require.NoError(t, err, "an empty flag overrides too")
	require.Empty(t, cfg.RedisURL)
	require.Equal(t, 1.0, cfg.StoreLocalShare)
}

// -h lists every flag with its variable, and never the environment's values.
func TestHelpListsFlagsWithoutValues(t *testing.T) {
	var out bytes.Buffer
	_, err := LoadConfig([]string{"-h"}, envOf(map[string]string{"OPENAI_API_KEY": "sk-secret-123"}), &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "-openai-api-key")
	require.Contains(t, out.String(), "[OPENAI_API_KEY]")
	require.Contains(t, out.String(), "-store-local-share share")
	require.NotContains(t, out.String(), "sk-secret-123")
}

// An application's own settings are read like Config's, flag over variable,
// and listed by -h with them.
func TestLoadConfigReadsExtraSettings(t *testing.T) {
	var color, shape string
	extra := []Setting{
		{Env: "APP_COLOR", Usage: "a color", Value: &color},
		{Env: "APP_SHAPE", Usage: "a shape", Value: &shape},
	}
	cfg, err := LoadConfig([]string{"-app-color", "red", "-task-queue", "q"},
		envOf(map[string]string{"APP_COLOR": "blue", "APP_SHAPE": "round"}), io.Discard, extra...)
	require.NoError(t, err)
	require.Equal(t, "q", cfg.TaskQueue)
	require.Equal(t, "red", color, "the flag wins")
	require.Equal(t, "round", shape, "the variable applies where no flag is given")

	var out bytes.Buffer
	_, err = LoadConfig([]string{"-h"}, envOf(nil), &out, extra...)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out.String(), "-app-color")
	require.Contains(t, out.String(), "a color [APP_COLOR]")

	_, err = LoadConfig([]string{"-app-colour", "red"}, envOf(nil), io.Discard, extra...)
	require.ErrorContains(t, err, "did you mean -app-color?")
}
