package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/internal/devserver"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// apiKey is what the recorder's workers send llmsim. It must never reach a
// history (inputs are stored there); the replay tests check it does not.
const apiKey = "sk-record-0d1e2f3a"

// recorder runs scenarios on one embedded Temporal server and writes their
// histories.
type recorder struct {
	server *devserver.Server
	client client.Client
	out    string
	logf   func(format string, args ...any)
}

// record starts an embedded server, runs each scenario on it and writes
// NAME.json (and the child's, for an escalation) into out.
func record(ctx context.Context, out string, list []scenario, logf func(string, ...any)) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	srv, err := devserver.Start(devserver.Options{})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := srv.Dial(client.Options{Logger: quietLogger()})
	if err != nil {
		return fmt.Errorf("record: dial: %w", err)
	}
	defer c.Close()
	r := &recorder{server: srv, client: c, out: out, logf: logf}
	for _, sc := range list {
		if err := r.run(ctx, sc); err != nil {
			return fmt.Errorf("record %s: %w", sc.name, err)
		}
	}
	return nil
}

// run records one scenario on a task queue and a worker of its own.
func (r *recorder) run(ctx context.Context, sc scenario) error {
	sim, err := llmsim.New(sc.sim)
	if err != nil {
		return err
	}
	httpSrv := httptest.NewServer(sim)
	defer httpSrv.Close()
	acts, err := activities.New(activities.Config{
		OpenAI:    activities.ProviderConfig{APIKey: apiKey, BaseURL: httpSrv.URL + "/v1/"},
		Anthropic: activities.ProviderConfig{APIKey: apiKey, BaseURL: httpSrv.URL},
	})
	if err != nil {
		return err
	}
	ps, err := quota.NewPolicies(sc.policies)
	if err != nil {
		return err
	}
	store, err := memory.New(ps, memory.Options{})
	if err != nil {
		return err
	}
	ic, err := interceptor.New(interceptor.Options{
		Store:          store,
		Fallbacks:      sc.fallbacks,
		WaitInWorkflow: sc.waitInWorkflow,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	taskQueue := "record-" + sc.name
	w := worker.New(r.client, taskQueue, worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	activities.Register(w, acts)
	workflows.Register(w)
	w.RegisterActivityWithOptions(lookup, activity.RegisterOptions{Name: lookupTool.Name})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	run, err := r.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: sc.name, TaskQueue: taskQueue, WorkflowExecutionTimeout: 2 * time.Minute,
	}, workflows.AgentWorkflow, sc.input)
	if err != nil {
		return err
	}
	var result workflows.AgentResult
	err = run.Get(ctx, &result)
	switch {
	case sc.fails == "" && err != nil:
		return fmt.Errorf("workflow failed: %w", err)
	case sc.fails != "" && !tollgate.IsType(err, sc.fails):
		return fmt.Errorf("workflow ended with %v, want a %s failure", err, sc.fails)
	}

	events, err := r.history(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		return err
	}
	if err := sc.check(events); err != nil {
		return err
	}
	if err := r.write(sc.name, events); err != nil {
		return err
	}
	children := childIDs(events)
	switch {
	case sc.child == "" && len(children) > 0:
		return fmt.Errorf("the run started children %q; the scenario expects none", children)
	case sc.child != "" && len(children) != 1:
		return fmt.Errorf("the run started children %q, want exactly one %s", children, tollgate.FallbackWorkflowName)
	case sc.child != "":
		childEvents, err := r.history(ctx, children[0], "")
		if err != nil {
			return err
		}
		if err := r.write(sc.child, childEvents); err != nil {
			return err
		}
	}
	return nil
}

// history fetches a closed workflow's full history.
func (r *recorder) history(ctx context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := r.client.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("history of %s is empty", workflowID)
	}
	return events, nil
}

// write stores events as name.json in the JSON form the Temporal CLI and
// worker.WorkflowReplayer.ReplayWorkflowHistoryFromJSONFile read.
func (r *recorder) write(name string, events []*historypb.HistoryEvent) error {
	b, err := protojson.Marshal(&historypb.History{Events: events})
	if err != nil {
		return err
	}
	// protojson varies its whitespace from build to build; indent it
	// ourselves so re-recording diffs only what changed.
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	path := filepath.Join(r.out, name+".json")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	r.logf("wrote %s (%d events)", path, len(events))
	return nil
}

// childIDs returns the workflow ids of the children a history started.
func childIDs(events []*historypb.HistoryEvent) []string {
	var ids []string
	for _, ev := range events {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			ids = append(ids, a.GetWorkflowId())
		}
	}
	return ids
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}
