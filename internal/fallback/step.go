package fallback

import "go.temporal.io/sdk/workflow"

// Step tells the activity interceptor that an activity call is one step of a
// fallback chain: run it on Target. It travels in the activity's Temporal
// header, written by the workflow interceptor.
type Step struct {
	// Target is "provider/model" (or "provider/account/model").
	Target string `json:"target"`
	// Step counts from 1; Steps is the chain's length.
	Step  int `json:"step"`
	Steps int `json:"steps"`
}

type stepKey struct{}

// WithStep returns a workflow context whose governed activity calls run as
// step s.
func WithStep(ctx workflow.Context, s Step) workflow.Context {
	return workflow.WithValue(ctx, stepKey{}, s)
}

// StepFrom returns the step set by WithStep, and whether one was.
func StepFrom(ctx workflow.Context) (Step, bool) {
	s, ok := ctx.Value(stepKey{}).(Step)
	return s, ok
}
