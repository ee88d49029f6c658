package tollgate

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// FallbackWorkflowName is the workflow type the workflow interceptor starts
// when a governed activity escalates; register workflows.FallbackWorkflow
// under it (workflows.Register does).
const FallbackWorkflowName = "FallbackWorkflow"

// FallbackInput is the input of the FallbackWorkflow child: which activity to
// run again, on which targets, with which options. The activity's own input
// travels beside it unchanged; each step's target is applied to it by the
// activity interceptor (see Retargetable).
type FallbackInput struct {
	// ActivityType is the governed activity to run.
	ActivityType string `json:"activity_type"`
	// From is the target that escalated.
	From string `json:"from"`
	// Chain lists the targets to try, in order.
	Chain []string `json:"chain"`
	// Options are the activity options of the original call.
	Options FallbackActivityOptions `json:"options"`
}

// FallbackActivityOptions carries the serializable part of the original
// call's workflow.ActivityOptions into the child.
type FallbackActivityOptions struct {
	TaskQueue              string                `json:"task_queue,omitempty"`
	ScheduleToCloseTimeout time.Duration         `json:"schedule_to_close_timeout,omitempty"`
	ScheduleToStartTimeout time.Duration         `json:"schedule_to_start_timeout,omitempty"`
	StartToCloseTimeout    time.Duration         `json:"start_to_close_timeout,omitempty"`
	HeartbeatTimeout       time.Duration         `json:"heartbeat_timeout,omitempty"`
	RetryPolicy            *temporal.RetryPolicy `json:"retry_policy,omitempty"`
}

// ActivityOptions returns the workflow.ActivityOptions o describes.
func (o FallbackActivityOptions) ActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              o.TaskQueue,
		ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
		ScheduleToStartTimeout: o.ScheduleToStartTimeout,
		StartToCloseTimeout:    o.StartToCloseTimeout,
		HeartbeatTimeout:       o.HeartbeatTimeout,
		RetryPolicy:            o.RetryPolicy,
	}
}
