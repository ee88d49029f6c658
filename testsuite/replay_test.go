package testsuite_test

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/reflect/protopath"
	"google.golang.org/protobuf/reflect/protorange"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/testsuite"
	"github.com/tollgate/tollgate/workflows"
)

// Every recorded history replays with Tollgate's interceptor registered,
// reproduces the workflow's recorded result, and shows the case it is named
// for.
func TestRecordedHistoriesReplay(t *testing.T) {
	for _, tc := range []struct {
		file string
		// opts are the options the history was recorded with.
		opts testsuite.Options
		// shows are strings the history must hold: the case it records.
		shows []string
		// check inspects the replayed workflow's result; nil for a
		// workflow that failed (the replayer keeps no result for it).
		check func(t *testing.T, result func(valuePtr any))
	}{
		{
			file: "plain.json",
			check: func(t *testing.T, result func(valuePtr any)) {
				out := agentResult(t, result)
				require.Len(t, out.Turns, 2)
				require.Equal(t, "gpt-plain", out.Turns[1].Model)
				require.Equal(t, 1, out.ToolCalls, "the model called its tool, which ran as an activity")
			},
		},
		{
			file:  "refused.json",
			shows: []string{tollgate.QuotaRefused},
			check: func(t *testing.T, result func(valuePtr any)) { require.Len(t, agentResult(t, result).Turns, 2) },
		},
		{
			file:  "waited.json",
			opts:  waitInWorkflow,
			shows: []string{"EVENT_TYPE_TIMER_STARTED", "tollgate-ticket", "EVENT_TYPE_MARKER_RECORDED"},
			check: func(t *testing.T, result func(valuePtr any)) { require.Len(t, agentResult(t, result).Turns, 2) },
		},
		{
			file:  "retry_after.json",
			shows: []string{tollgate.RateLimited},
			check: func(t *testing.T, result func(valuePtr any)) { require.Len(t, agentResult(t, result).Turns, 1) },
		},
		{
			file:  "spend_cap.json",
			shows: []string{tollgate.SpendCapReached, "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED"},
		},
		{
			file:  "escalation.json",
			shows: []string{tollgate.RateLimitEscalation, "EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED"},
			check: func(t *testing.T, result func(valuePtr any)) {
				require.Equal(t, "claude-backup", agentResult(t, result).Turns[0].Model, "the child's answer resolves the call")
			},
		},
		{
			file:  "escalation_child.json",
			shows: []string{tollgate.FallbackWorkflowName, "tollgate-fallback"},
			check: func(t *testing.T, result func(valuePtr any)) {
				var out activities.Response
				result(&out)
				require.Equal(t, "claude-backup", out.Model)
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			for _, s := range tc.shows {
				require.Contains(t, string(raw), s, "the history no longer records its case; re-record it")
			}

			r, err := testsuite.NewReplayer(tc.opts)
			require.NoError(t, err)
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, path))
			if tc.check != nil {
				h := readHistory(t, path)
				result := func(valuePtr any) {
					t.Helper()
					require.NoError(t, r.(resulter).GetWorkflowResult(startedID(h), valuePtr))
				}
				requireRecordedResult(t, h, result)
				tc.check(t, result)
			}
		})
	}
}

// Every history in testdata is covered by TestRecordedHistoriesReplay, and
// ReplayHistoryFile replays it.
func TestReplayHistoryFileReplaysEveryFixture(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.Len(t, paths, 7)
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var opts testsuite.Options
			if filepath.Base(path) == "waited.json" {
				opts = waitInWorkflow
			}
			require.NoError(t, testsuite.ReplayHistoryFile(nil, path, opts))
		})
	}
}

// waitInWorkflow are the options waited.json was recorded with.
var waitInWorkflow = testsuite.Options{Interceptor: interceptor.Options{WaitInWorkflow: true}}

// The replay tests catch what they are for: each altered workflow below
// produces other commands than the recorded run, and replay says so.
func TestReplayDetectsNondeterminism(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		opts testsuite.Options
		// plain replays without Tollgate's interceptor.
		plain bool
	}{
		{
			name: "AgentWorkflow sleeps before its first call",
			file: "plain.json",
			opts: testsuite.Options{Register: registerAgent(func(ctx workflow.Context, in workflows.AgentInput) (workflows.AgentResult, error) {
				if err := workflow.Sleep(ctx, time.Second); err != nil {
					return workflows.AgentResult{}, err
				}
				return workflows.AgentWorkflow(ctx, in)
			})},
		},
		{
			name: "AgentWorkflow runs one turn fewer",
			file: "plain.json",
			opts: testsuite.Options{Register: registerAgent(func(ctx workflow.Context, in workflows.AgentInput) (workflows.AgentResult, error) {
				in.MaxTurns = 1
				return workflows.AgentWorkflow(ctx, in)
			})},
		},
		{
			name: "the fallback child is started under another type",
			file: "escalation.json",
			opts: testsuite.Options{Replayer: worker.WorkflowReplayerOptions{
				Interceptors: []sdkinterceptor.WorkerInterceptor{&renameChild{to: "FallbackWorkflowV2"}},
			}},
		},
		{
			name: "a history that waited in the workflow is replayed without WaitInWorkflow",
			file: "waited.json",
		},
		{
			name:  "the escalation is replayed without Tollgate's interceptor",
			file:  "escalation.json",
			plain: true,
		},
		{
			name: "FallbackWorkflow calls another activity",
			file: "escalation_child.json",
			opts: testsuite.Options{Register: func(r worker.WorkflowRegistry) {
				r.RegisterWorkflow(workflows.AgentWorkflow)
				r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in tollgate.FallbackInput, arg converter.RawValue) (converter.RawValue, error) {
					in.ActivityType = "SomethingElse"
					return workflows.FallbackWorkflow(ctx, in, arg)
				}, workflow.RegisterOptions{Name: tollgate.FallbackWorkflowName})
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			var err error
			if tc.plain {
				// Under the recorded workflow id, so that the only
				// difference is the missing interceptor.
				r := worker.NewWorkflowReplayer()
				workflows.Register(r)
				h := readHistory(t, path)
				err = r.ReplayWorkflowHistoryWithOptions(quietLogger(), h, worker.ReplayWorkflowHistoryOptions{
					OriginalExecution: workflow.Execution{ID: startedID(h)},
				})
			} else {
				err = testsuite.ReplayHistoryFile(nil, path, tc.opts)
			}
			require.ErrorContains(t, err, "[TMPRL1100]", "the SDK's nondeterminism error")
		})
	}
}

// ReplayHistoryFile reports what stops it from replaying at all.
func TestReplayHistoryFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		opts testsuite.Options
		want string
	}{
		{"missing file", filepath.Join("testdata", "nope.json"), testsuite.Options{}, "no such file"},
		{"invalid interceptor options", filepath.Join("testdata", "plain.json"), testsuite.Options{Interceptor: interceptor.Options{EscalateAfter: -1}}, "EscalateAfter"},
		{"workflow not registered", filepath.Join("testdata", "plain.json"), testsuite.Options{Register: func(worker.WorkflowRegistry) {}}, "AgentWorkflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, testsuite.ReplayHistoryFile(nil, tc.path, tc.opts), tc.want)
		})
	}
}

// No recorded history holds an API key: keys come from the worker's
// configuration, never from workflow or activity input.
func TestRecordedHistoriesHoldNoAPIKey(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	for _, path := range paths {
		h := readHistory(t, path)
		// Payload data is stored as bytes (base64 in the file): look
		// inside every field, decoded.
		require.NoError(t, protorange.Range(h.ProtoReflect(), func(v protopath.Values) error {
			var b []byte
			switch x := v.Index(-1).Value.Interface().(type) {
			case []byte:
				b = x
			case string:
				b = []byte(x)
			}
			require.False(t, bytes.Contains(b, []byte("sk-")), "%s: %s holds an API key", path, v.Path)
			return nil
		}))
	}
}

// registerAgent registers fn as AgentWorkflow, beside FallbackWorkflow.
func registerAgent(fn func(workflow.Context, workflows.AgentInput) (workflows.AgentResult, error)) func(worker.WorkflowRegistry) {
	return func(r worker.WorkflowRegistry) {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: "AgentWorkflow"})
		r.RegisterWorkflowWithOptions(workflows.FallbackWorkflow, workflow.RegisterOptions{Name: tollgate.FallbackWorkflowName})
	}
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// resulter is implemented by NewReplayer's replayer (forwarding to the
// SDK's): the result of each replayed workflow that completed, by id.
type resulter interface {
	GetWorkflowResult(workflowID string, valuePtr any) error
}

func agentResult(t *testing.T, result func(valuePtr any)) workflows.AgentResult {
	t.Helper()
	var out workflows.AgentResult
	result(&out)
	return out
}

func readHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}

// startedID is the workflow id a history ran under.
func startedID(h *historypb.History) string {
	return h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
}

// requireRecordedResult checks that the replay completed the workflow with
// the result the recorded run completed it with. The replayer compares
// commands, not results, so it would not notice on its own a change to how
// the interceptor hands the child's answer back to the caller.
func requireRecordedResult(t *testing.T, h *historypb.History, result func(valuePtr any)) {
	t.Helper()
	last := h.Events[len(h.Events)-1].GetWorkflowExecutionCompletedEventAttributes()
	require.NotNil(t, last, "the history does not end with the workflow's completion")
	var recorded, replayed converter.RawValue
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(last.GetResult(), &recorded))
	result(&replayed)
	require.JSONEq(t, string(recorded.Payload().GetData()), string(replayed.Payload().GetData()))
}

// renameChild is a worker interceptor that starts every child workflow under
// another type: a stand-in for a change to how Tollgate starts the fallback
// child.
type renameChild struct {
	sdkinterceptor.WorkerInterceptorBase
	to string
}

func (r *renameChild) InterceptWorkflow(ctx workflow.Context, next sdkinterceptor.WorkflowInboundInterceptor) sdkinterceptor.WorkflowInboundInterceptor {
	i := &renameChildInbound{to: r.to}
	i.Next = next
	return i
}

type renameChildInbound struct {
	sdkinterceptor.WorkflowInboundInterceptorBase
	to string
}

func (i *renameChildInbound) Init(outbound sdkinterceptor.WorkflowOutboundInterceptor) error {
	o := &renameChildOutbound{to: i.to}
	o.Next = outbound
	return i.Next.Init(o)
}

type renameChildOutbound struct {
	sdkinterceptor.WorkflowOutboundInterceptorBase
	to string
}

func (o *renameChildOutbound) ExecuteChildWorkflow(ctx workflow.Context, _ string, args ...any) workflow.ChildWorkflowFuture {
	return o.Next.ExecuteChildWorkflow(ctx, o.to, args...)
}
