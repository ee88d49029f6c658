package interceptor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// server is one embedded Temporal server for the package's end-to-end
// tests; each test uses its own task queue.
var server *devserver.Server

func TestMain(m *testing.M) {
	if os.Getenv(lostWorkerEnv) != "" {
		// This process is the worker that
		// TestWorkerLostMidStreamRetriesWithinHeartbeatTimeout kills.
		os.Exit(lostWorker())
	}
	s, err := devserver.Start(devserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server = s
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

const apiKey = "sk-test-7c1d9e5a"

// env is one end-to-end setup: llmsim behind httptest, a Temporal client and
// a task queue of the test's own.
type env struct {
	t         *testing.T
	sim       *llmsim.Sim
	simURL    string
	client    client.Client
	taskQueue string
	// broken ends when a watched store fails (breakStore), its cause the
	// failure, which fails the test unless forgiven: see watch.
	broken     context.Context
	breakStore context.CancelCauseFunc
	forgiven   bool
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func newEnv(t *testing.T, cfg llmsim.Config) *env {
	t.Helper()
	sim, err := llmsim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	c, err := server.Dial(client.Options{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	e := &env{t: t, sim: sim, simURL: srv.URL, client: c, taskQueue: "tq-" + t.Name()}
	e.broken, e.breakStore = context.WithCancelCause(context.Background())
	t.Cleanup(func() {
		if e.broken.Err() != nil && !e.forgiven && !t.Failed() {
			t.Errorf("%v", context.Cause(e.broken))
		}
	})
	return e
}

// forgive keeps a watched store's failure, which the test caused on
// purpose, from failing the test when it ends.
func (e *env) forgive() { e.forgiven = true }

func (e *env) activities(accounts ...activities.AccountConfig) *activities.Activities {
	a, err := activities.New(activities.Config{
		OpenAI:    activities.ProviderConfig{APIKey: apiKey, BaseURL: e.simURL + "/v1/"},
		Anthropic: activities.ProviderConfig{APIKey: apiKey, BaseURL: e.simURL},
		Gemini:    activities.ProviderConfig{APIKey: apiKey, BaseURL: e.simURL},
		Accounts:  accounts,
	})
	require.NoError(e.t, err)
	return a
}

// slots counts activity executions in flight on a worker, outermost, so it
// sees every attempt including refused ones.
type slots struct {
	sdkinterceptor.WorkerInterceptorBase
	now, peak atomic.Int64
	// ended holds when each attempt returned, by workflow id and attempt.
	ended sync.Map
	// gate, when set, holds executions back until a burst has gathered.
	gate atomic.Pointer[gate]
}

// gate holds back the first n activity executions the workers sharing it
// see (local activities included) until all n have arrived, then lets every
// execution through at once: a burst that outruns a limit however slowly
// the machine starts its workflows.
type gate struct {
	n       int64
	arrived atomic.Int64
	open    chan struct{}
}

func newGate(n int) *gate { return &gate{n: int64(n), open: make(chan struct{})} }

// pass waits for the gate to open, if the caller is among its first n.
func (g *gate) pass(ctx context.Context) {
	switch k := g.arrived.Add(1); {
	case k > g.n:
		return
	case k == g.n:
		close(g.open)
	}
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

// wait waits until the gate has opened or d has passed, and says which.
func (g *gate) wait(d time.Duration) bool {
	select {
	case <-g.open:
		return true
	case <-time.After(d):
		return false
	}
}

type attemptOf struct {
	workflowID string
	attempt    int32
}

// endOf returns when the given attempt of the workflow's activity returned
// on this worker.
func (s *slots) endOf(t *testing.T, workflowID string, attempt int32) time.Time {
	t.Helper()
	v, ok := s.ended.Load(attemptOf{workflowID, attempt})
	require.True(t, ok, "attempt %d of %s's activity did not run on this worker", attempt, workflowID)
	return v.(time.Time)
}

// InterceptActivity implements sdkinterceptor.WorkerInterceptor.
func (s *slots) InterceptActivity(ctx context.Context, next sdkinterceptor.ActivityInboundInterceptor) sdkinterceptor.ActivityInboundInterceptor {
	return hook(next, s.execute)
}

func (s *slots) execute(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput, next sdkinterceptor.ActivityInboundInterceptor) (any, error) {
	if g := s.gate.Load(); g != nil {
		g.pass(ctx)
	}
	n := s.now.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	defer s.now.Add(-1)
	info := activity.GetInfo(ctx)
	defer func() { s.ended.Store(attemptOf{info.WorkflowExecution.ID, info.Attempt}, time.Now()) }()
	return next.ExecuteActivity(ctx, in)
}

// hooked is an activity inbound interceptor that runs fn, given the next
// interceptor, for every execution: the one body a test's interceptor needs.
type hooked struct {
	sdkinterceptor.ActivityInboundInterceptorBase
	fn func(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput, next sdkinterceptor.ActivityInboundInterceptor) (any, error)
}

func hook(next sdkinterceptor.ActivityInboundInterceptor, fn func(context.Context, *sdkinterceptor.ExecuteActivityInput, sdkinterceptor.ActivityInboundInterceptor) (any, error)) sdkinterceptor.ActivityInboundInterceptor {
	h := &hooked{fn: fn}
	h.Next = next
	return h
}

func (h *hooked) ExecuteActivity(ctx context.Context, in *sdkinterceptor.ExecuteActivityInput) (any, error) {
	return h.fn(ctx, in, h.Next)
}

// startWorker runs a worker with Tollgate's interceptor built from opts on
// the env's task queue until the test ends.
func (e *env) startWorker(opts interceptor.Options) (*interceptor.WorkerInterceptor, *slots) {
	e.t.Helper()
	ic, sl, _ := e.startStoppableWorker(opts)
	return ic, sl
}

// startStoppableWorker is startWorker that also returns a func stopping
// the worker before the test ends (calling it again does nothing).
func (e *env) startStoppableWorker(opts interceptor.Options) (*interceptor.WorkerInterceptor, *slots, func()) {
	e.t.Helper()
	return e.startWorkerWith(opts, workerSetup{})
}

// workerSetup is what startWorkerWith adds to a test's worker.
type workerSetup struct {
	// options are the worker's options; their Interceptors are replaced.
	options worker.Options
	// outer interceptors run outside the slots counter, inner ones inside
	// Tollgate's (they see granted attempts only).
	outer, inner []sdkinterceptor.WorkerInterceptor
	// workflows are registered beside the agent workflows.
	workflows []any
	// accounts are the activities' further accounts (pool members').
	accounts []activities.AccountConfig
}

// startWorkerWith is startStoppableWorker with what ws adds.
func (e *env) startWorkerWith(opts interceptor.Options, ws workerSetup) (*interceptor.WorkerInterceptor, *slots, func()) {
	e.t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Store != nil {
		opts.Store = e.watch(opts.Store)
	}
	ic, err := interceptor.New(opts)
	require.NoError(e.t, err)
	sl := &slots{}
	wo := ws.options
	wo.Interceptors = slices.Concat(ws.outer, []sdkinterceptor.WorkerInterceptor{sl, ic}, ws.inner)
	w := worker.New(e.client, e.taskQueue, wo)
	activities.Register(w, e.activities(ws.accounts...))
	workflows.Register(w)
	registerTools(w)
	for _, wf := range ws.workflows {
		w.RegisterWorkflow(wf)
	}
	require.NoError(e.t, w.Start())
	stop := sync.OnceFunc(w.Stop)
	e.t.Cleanup(stop)
	return ic, sl, stop
}

// start starts an AgentWorkflow with id.
func (e *env) start(id string, in workflows.AgentInput) client.WorkflowRun {
	e.t.Helper()
	run, err := e.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: id, TaskQueue: e.taskQueue, WorkflowExecutionTimeout: 2 * time.Minute,
	}, workflows.AgentWorkflow, in)
	require.NoError(e.t, err)
	e.endWithTest(run)
	return run
}

// endWithTest terminates run when the test ends, if it still runs: a test
// that failed leaves no workflow running on the shared server for a later
// test that starts one with the same id to wait on (ExecuteWorkflow returns
// the running one) until its timeout.
func (e *env) endWithTest(run client.WorkflowRun) {
	e.t.Cleanup(func() {
		_ = e.client.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "the test ended")
	})
}

// result waits for run's result (see waitCtx).
func (e *env) result(run client.WorkflowRun) (workflows.AgentResult, error) {
	ctx, cancel := e.waitCtx(2 * time.Minute)
	defer cancel()
	var out workflows.AgentResult
	err := run.Get(ctx, &out)
	return out, waited(ctx, err)
}

func (e *env) history(id string) []*historypb.HistoryEvent {
	e.t.Helper()
	var events []*historypb.HistoryEvent
	it := e.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		events = append(events, ev)
	}
	return events
}

// activityRun is one activity of a history: when it was scheduled, when its
// last attempt started, how many attempts it took and the last failure
// before that attempt.
type activityRun struct {
	scheduled, started time.Time
	attempt            int32
	lastFailure        string
	lastRetryDelay     time.Duration
}

func activityRuns(events []*historypb.HistoryEvent) []activityRun {
	var runs []activityRun
	byID := map[int64]int{}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			byID[ev.GetEventId()] = len(runs)
			runs = append(runs, activityRun{scheduled: ev.GetEventTime().AsTime()})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			r := &runs[byID[a.GetScheduledEventId()]]
			r.started = ev.GetEventTime().AsTime()
			r.attempt = a.GetAttempt()
			if f := a.GetLastFailure(); f != nil {
				r.lastFailure = f.GetApplicationFailureInfo().GetType()
				r.lastRetryDelay = f.GetApplicationFailureInfo().GetNextRetryDelay().AsDuration()
			}
		}
	}
	return runs
}

func childWorkflowTypes(events []*historypb.HistoryEvent) []string {
	var types []string
	for _, ev := range events {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			types = append(types, a.GetWorkflowType().GetName())
		}
	}
	return types
}

// timersStarted counts the durable timers a history started.
func timersStarted(events []*historypb.HistoryEvent) int {
	n := 0
	for _, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
			n++
		}
	}
	return n
}
