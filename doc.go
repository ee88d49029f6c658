// Package tollgate holds what workflow code, activities and the interceptor
// share: the error types Tollgate ends an activity attempt with, their
// details, and the fallback contract between the workflow interceptor and
// workflows.FallbackWorkflow.
//
// The governor itself is in package interceptor; budgets are in quota;
// provider answers are read by classify. See the README for the whole picture.
package tollgate
