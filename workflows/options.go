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
// ScheduleToCloseTimeout (1 hour) bounds the call instead. A wait that would
// pass it escalates to a backup model or fails at once with
// tollgate.QuotaWaitExceedsDeadline.
//
// StartToCloseTimeout (30 minutes) bounds one attempt and is sized for the
// longest generation, not the typical one: anthropic-sdk-go plans an hour
// per 128,000 output tokens, so a 64,000-token answer may take half an
// hour. What catches a dead worker or a hung call is the
// HeartbeatTimeout (30 seconds): activities.Complete heartbeats while a
// call runs and cuts a stream that sends nothing for that long, so a call
// whose worker dies is retried on another within 30 seconds, counted
// against Tollgate's transient budget. An activity run with these options
// must heartbeat at least that often (activity.RecordHeartbeat); raise
// HeartbeatTimeout for a model that may think longer than that before its
// first token.
//
// The retry intervals only apply to errors Tollgate does not classify: its
// own errors carry their delay.
func LLMActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ScheduleToCloseTimeout: time.Hour,
		StartToCloseTimeout:    30 * time.Minute,
		HeartbeatTimeout:       30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    0,
		},
	}
}

// ToolActivityOptions returns the activity options AgentWorkflow runs its
// tools with: a tool is not an LLM call, so an attempt has 5 minutes
// (StartToCloseTimeout) and a call 3 attempts, a second apart and
// doubling; a tool that still fails answers the model with an error
// result.
func ToolActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumAttempts:    3,
		},
	}
}
