package testsuite

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/workflows"
)

// Options configure NewReplayer and ReplayHistoryFile. The zero value
// replays Tollgate's own workflows (AgentWorkflow and FallbackWorkflow) with
// an interceptor of default options.
type Options struct {
	// Register registers, under the names the worker used, the workflows
	// the histories ran. A history that escalated also needs
	// FallbackWorkflow: call workflows.Register beside your own. Nil means
	// workflows.Register.
	Register func(worker.WorkflowRegistry)

	// Interceptor is the configuration the worker's Tollgate interceptor
	// ran with. The workflow side reads only Activities and
	// WaitInWorkflow: an activity type governed by name (rather than by a
	// quota.Governed input) may escalate or wait only if it is listed, so
	// list it here as the worker did, and set WaitInWorkflow as the worker
	// did for the histories it recorded. A nil Store
	// is replaced by an empty memory store; replay runs no activity and
	// charges nothing.
	Interceptor interceptor.Options

	// Replayer holds the replayer's other options: the data converter,
	// context propagators and interceptors the worker ran with. Tollgate's
	// interceptor is appended to Replayer.Interceptors (innermost, as when
	// a worker lists it last), unless the list already holds a
	// *interceptor.WorkerInterceptor, which is then used where it stands
	// and Interceptor is ignored.
	Replayer worker.WorkflowReplayerOptions
}

// NewReplayer returns a workflow replayer with Tollgate's interceptor
// registered and the workflows of opts.Register on it. Replay histories
// with its ReplayWorkflowHistory... methods; a history that the workflow
// code (or the interceptor's workflow side) no longer reproduces fails
// with the SDK's nondeterminism error (its message starts "[TMPRL1100]").
//
// Unlike the SDK's own replayer, it replays a history under the workflow id
// it ran under, read from its WorkflowExecutionStarted event, as a worker
// replaying it would (a history from a server too old to record the id
// there replays as "ReplayId"). The SDK's replayer
// uses "ReplayId" instead, and under that id Tollgate's fallback children,
// whose ids are derived from the parent's, do not match the history. Pass
// ReplayWorkflowHistoryWithOptions an OriginalExecution to choose the id.
// A nil logger discards the replayer's log (the SDK's would log each
// nondeterminism panic with its stack).
//
// It returns an error if opts.Interceptor is invalid or the SDK rejects
// opts.Replayer.
func NewReplayer(opts Options) (worker.WorkflowReplayer, error) {
	ro := opts.Replayer
	if !hasTollgate(ro.Interceptors) {
		ic, err := newInterceptor(opts.Interceptor)
		if err != nil {
			return nil, err
		}
		ro.Interceptors = append(append([]sdkinterceptor.WorkerInterceptor(nil), ro.Interceptors...), ic)
	}
	r, err := worker.NewWorkflowReplayerWithOptions(ro)
	if err != nil {
		return nil, fmt.Errorf("testsuite: replayer: %w", err)
	}
	register := opts.Register
	if register == nil {
		register = workflows.Register
	}
	register(r)
	return &replayer{WorkflowReplayer: r}, nil
}

// ReplayHistoryFile replays the workflow history in the JSON file at path
// (as written by `temporal workflow show --output json` or by
// client.GetWorkflowHistory and protojson) with Tollgate's interceptor
// registered. It returns nil if the workflow code reproduces the history,
// the SDK's nondeterminism error if it does not, and an error if the file
// cannot be read or the replayer cannot be built. The history replays under
// its original workflow id (see NewReplayer). A nil logger discards the
// replayer's log.
func ReplayHistoryFile(logger sdklog.Logger, path string, opts Options) error {
	r, err := NewReplayer(opts)
	if err != nil {
		return err
	}
	if err := r.ReplayWorkflowHistoryFromJSONFile(logger, path); err != nil {
		return fmt.Errorf("testsuite: replay %s: %w", path, err)
	}
	return nil
}

// newInterceptor builds the interceptor a replay runs, over an empty memory
// store when opts names none.
func newInterceptor(opts interceptor.Options) (*interceptor.WorkerInterceptor, error) {
	if opts.Store == nil {
		ps, err := quota.NewPolicies(nil)
		if err != nil {
			return nil, fmt.Errorf("testsuite: %w", err)
		}
		s, err := memory.New(ps, memory.Options{Clock: opts.Clock})
		if err != nil {
			return nil, fmt.Errorf("testsuite: %w", err)
		}
		opts.Store = s
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ic, err := interceptor.New(opts)
	if err != nil {
		return nil, fmt.Errorf("testsuite: %w", err)
	}
	return ic, nil
}

func hasTollgate(ics []sdkinterceptor.WorkerInterceptor) bool {
	for _, ic := range ics {
		if _, ok := ic.(*interceptor.WorkerInterceptor); ok {
			return true
		}
	}
	return false
}

// replayer replays histories under their original workflow id.
type replayer struct {
	worker.WorkflowReplayer
}

// ReplayWorkflowHistory implements worker.WorkflowReplayer.
func (r *replayer) ReplayWorkflowHistory(logger sdklog.Logger, h *historypb.History) error {
	return r.ReplayWorkflowHistoryWithOptions(logger, h, worker.ReplayWorkflowHistoryOptions{})
}

// ReplayWorkflowHistoryWithOptions implements worker.WorkflowReplayer. An
// empty OriginalExecution.ID is read from the history; a nil logger
// discards the log.
func (r *replayer) ReplayWorkflowHistoryWithOptions(logger sdklog.Logger, h *historypb.History, opts worker.ReplayWorkflowHistoryOptions) error {
	if logger == nil {
		logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	if opts.OriginalExecution.ID == "" && len(h.GetEvents()) > 0 {
		opts.OriginalExecution.ID = h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	}
	return r.WorkflowReplayer.ReplayWorkflowHistoryWithOptions(logger, h, opts)
}

// ReplayWorkflowHistoryFromJSONFile implements worker.WorkflowReplayer.
func (r *replayer) ReplayWorkflowHistoryFromJSONFile(logger sdklog.Logger, path string) error {
	return r.ReplayPartialWorkflowHistoryFromJSONFile(logger, path, 0)
}

// ReplayPartialWorkflowHistoryFromJSONFile implements
// worker.WorkflowReplayer.
func (r *replayer) ReplayPartialWorkflowHistoryFromJSONFile(logger sdklog.Logger, path string, lastEventID int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{LastEventID: lastEventID})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return r.ReplayWorkflowHistory(logger, h)
}

// GetWorkflowResult forwards to the SDK's replayer, which keeps the result
// of each replayed workflow that completed, by workflow id.
func (r *replayer) GetWorkflowResult(workflowID string, valuePtr any) error {
	res, ok := r.WorkflowReplayer.(interface {
		GetWorkflowResult(workflowID string, valuePtr any) error
	})
	if !ok {
		return errors.New("testsuite: the SDK's replayer keeps no results")
	}
	return res.GetWorkflowResult(workflowID, valuePtr)
}
