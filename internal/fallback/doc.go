// Package fallback carries one step of a fallback chain from the workflow
// that runs it (workflows.FallbackWorkflow) to the workflow interceptor,
// which writes it into the activity's Temporal header for the activity
// interceptor to apply. It is plumbing between those packages, not API: a
// user's code never sets a step itself.
package fallback
