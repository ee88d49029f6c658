package activities

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate/tollgate/internal/syncbuf"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// TestAPIKeyNeverInInputOrLogs runs successful and failing calls as real
// Temporal activities with a debug-level logger and checks the key appears in
// neither the activity input, the results, the errors nor the log.
func TestAPIKeyNeverInInputOrLogs(t *testing.T) {
	f := newSimFixture(t)
	require.NoError(t, f.sim.Inject(
		llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: "claude-haiku-4-5", Times: 1, RetryAfter: time.Second},
		llmsim.Fault{Kind: llmsim.FaultSpendCap, Model: "gpt-4o", After: 1},
	))
	var logs syncbuf.Buffer
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	env := suite.NewTestActivityEnvironment()
	Register(env, f.acts)

	// A second worker with a wrong key: the 401 must not echo it either.
	const wrongKey = "sk-wrong-key-0a1b2c3d"
	wrong := newActs(t, f.srv, wrongKey)
	wrongEnv := suite.NewTestActivityEnvironment()
	wrongEnv.RegisterActivity(wrong) // the struct form registers Complete too

	var outputs []string
	run := func(env *testsuite.TestActivityEnvironment, req Request) {
		in, err := json.Marshal(req)
		require.NoError(t, err)
		outputs = append(outputs, string(in))
		val, err := env.ExecuteActivity(CompleteActivity, req)
		if err != nil {
			outputs = append(outputs, err.Error())
			return
		}
		var resp Response
		require.NoError(t, val.Get(&resp))
		out, err := json.Marshal(resp)
		require.NoError(t, err)
		outputs = append(outputs, string(out))
	}
	run(env, chat(OpenAI, "gpt-4o", "hello"))                // success
	run(env, chat(OpenAI, "gpt-4o", "hello"))                // spend cap
	run(env, chat(Anthropic, "claude-haiku-4-5", "hello"))   // 429
	run(env, chat(Anthropic, "claude-haiku-4-5", "hello"))   // success
	run(env, chat(Anthropic, "claude-haiku-4-5", "x"))       // success
	run(wrongEnv, chat(OpenAI, "gpt-4o-tiny", "hello"))      // 401
	run(wrongEnv, chat(Anthropic, "claude-haiku-4-5", "hi")) // 401

	st := f.sim.Stats("")
	require.EqualValues(t, 3, st.Accepted)
	require.EqualValues(t, 2, st.TooManyRequests)
	require.EqualValues(t, 2, st.Failed)
	require.Contains(t, logs.String(), "LLM call done", "the debug log was captured")
	require.Contains(t, logs.String(), "LLM call failed")

	all := strings.Join(outputs, "\n") + "\n" + logs.String()
	for _, key := range []string{testKey, wrongKey} {
		require.NotContains(t, all, key)
		require.NotContains(t, all, key[len(key)-8:], "not even the key's tail")
	}
	require.NotContains(t, logs.String(), "hello", "prompts are not logged")
}
