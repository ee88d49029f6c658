package testsuite_test

import (
	"fmt"
	"path/filepath"

	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/testsuite"
	"github.com/tollgate/tollgate/workflows"
)

// Replay one history exported with
// `temporal workflow show --workflow-id ID --output json`.
func ExampleReplayHistoryFile() {
	err := testsuite.ReplayHistoryFile(nil, "testdata/escalation.json", testsuite.Options{
		Register: func(r worker.WorkflowRegistry) {
			workflows.Register(r) // FallbackWorkflow, for escalated calls
			// r.RegisterWorkflow(MyWorkflow)
		},
	})
	fmt.Println("replayed:", err == nil)
	// Output: replayed: true
}

// Build one replayer and replay a directory of histories with it. Some of
// these were recorded by a worker with WaitInWorkflow on; a replayer with it
// on also replays the histories recorded without it.
func ExampleNewReplayer() {
	r, err := testsuite.NewReplayer(testsuite.Options{
		Register:    workflows.Register,
		Interceptor: interceptor.Options{WaitInWorkflow: true},
	})
	if err != nil {
		panic(err)
	}
	paths, _ := filepath.Glob("testdata/*.json")
	for _, path := range paths {
		if err := r.ReplayWorkflowHistoryFromJSONFile(nil, path); err != nil {
			fmt.Println(path, err)
		}
	}
	fmt.Println("replayed", len(paths), "histories")
	// Output: replayed 7 histories
}
