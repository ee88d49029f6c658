package fallback

import (
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
)

// OptionsFrom captures the serializable part of ao, for the FallbackInput
// of the child that runs an escalated call.
func OptionsFrom(ao workflow.ActivityOptions) tollgate.FallbackActivityOptions {
	return tollgate.FallbackActivityOptions{
		TaskQueue:              ao.TaskQueue,
		ScheduleToCloseTimeout: ao.ScheduleToCloseTimeout,
		ScheduleToStartTimeout: ao.ScheduleToStartTimeout,
		StartToCloseTimeout:    ao.StartToCloseTimeout,
		HeartbeatTimeout:       ao.HeartbeatTimeout,
		RetryPolicy:            ao.RetryPolicy,
	}
}
