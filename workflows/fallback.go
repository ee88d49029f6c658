package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/fallback"
)

// FallbackWorkflow runs an escalated governed call on its backup chain: each
// target in turn, until one answers. The call's input arrives unchanged as
// arg; each step's target travels with the activity call, in its header,
// and the activity interceptor applies it. A step that escalates, or whose
// key is spend-capped, hands over to the next; any other failure ends the
// chain. When every target failed, the error is a
// non-retryable tollgate.FallbackChainExhausted naming every model tried.
//
// The interceptor starts it as a child (registered as
// tollgate.FallbackWorkflowName) and resolves the caller's future with its
// result.
func FallbackWorkflow(ctx workflow.Context, in tollgate.FallbackInput, arg converter.RawValue) (converter.RawValue, error) {
	if in.ActivityType == "" || len(in.Chain) == 0 {
		return converter.RawValue{}, temporal.NewNonRetryableApplicationError(
			"tollgate: FallbackWorkflow needs an activity type and at least one target", tollgate.InvalidRequest, nil)
	}
	ao := in.Options.ActivityOptions()
	if ao.StartToCloseTimeout == 0 && ao.ScheduleToCloseTimeout == 0 {
		ao = LLMActivityOptions()
	}
	ctx = workflow.WithActivityOptions(ctx, ao)
	tried := []string{in.From}
	var last error
	for i, target := range in.Chain {
		step := fallback.Step{Target: target, Step: i + 1, Steps: len(in.Chain)}
		var out converter.RawValue
		err := workflow.ExecuteActivity(fallback.WithStep(ctx, step), in.ActivityType, arg).Get(ctx, &out)
		if err == nil {
			return out, nil
		}
		tried = append(tried, target)
		last = err
		if _, escalated := tollgate.Escalation(err); !escalated &&
			!tollgate.IsType(err, tollgate.SpendCapReached) && !tollgate.IsType(err, tollgate.DailyQuotaExhausted) {
			return converter.RawValue{}, err
		}
		workflow.GetLogger(ctx).Info("tollgate: fallback step gave up", "target", target, "step", i+1, "of", len(in.Chain))
	}
	return converter.RawValue{}, temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("tollgate: every model was rate limited or capped: tried %s", strings.Join(tried, ", ")),
		tollgate.FallbackChainExhausted, last)
}
