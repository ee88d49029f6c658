package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// LLMActivityOptions returns activity options for governed LLM calls.
//
// Tollgate ends an attempt that must wait for budget with a retryable error
// whose NextRetryDelay is the wait, so the Temporal server (not a worker
// slot) holds the wait. Every such refusal counts as an attempt, so the retry
// policy must not bound attempts: MaximumAttempts is 0 (unlimited) and the
// ScheduleToCloseTimeout (30 minutes) bounds the call instead. A wait that
// would pass it escalates to a backup model or fails at once with
// tollgate.QuotaWaitExceedsDeadline. StartToCloseTimeout (2 minutes) bounds a
// single provider call. The retry intervals only apply to errors Tollgate
// does not classify: its own errors carry their delay.
func LLMActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: 30 * time.Minute,
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    0,
		},
	}
}
