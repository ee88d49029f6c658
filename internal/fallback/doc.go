// Package fallback is the plumbing of fallback chains between the
// interceptor and workflows.FallbackWorkflow: the step of a chain that the
// workflow runs (carried to the workflow interceptor, which writes it into
// the activity's Temporal header for the activity interceptor to apply), and
// the options the interceptor hands the child. It is not API: a user's code
// never sets a step itself.
package fallback
