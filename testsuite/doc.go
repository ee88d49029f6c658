// Package testsuite replays workflow histories with Tollgate's interceptor
// registered, so a change that breaks the determinism of a workflow, or of
// the interceptor's workflow side (which turns a rate-limit escalation into
// a FallbackWorkflow child), fails a test rather than a production worker.
//
// Replay your own histories with ReplayHistoryFile, or build a replayer once
// with NewReplayer and replay many. Export a history with the Temporal CLI:
//
//	temporal workflow show --workflow-id ID --output json > testdata/ID.json
//
// # Recorded histories
//
// testdata/ holds histories recorded from real runs (the embedded Temporal
// server, llmsim as the provider, a memory store and Tollgate's
// interceptor), replayed by this package's tests:
//
//   - plain.json: a two-turn AgentWorkflow, each call admitted at once.
//   - refused.json: two turns under one request per 2 s; the second call
//     is refused by the bucket (tollgate.QuotaRefused) and admitted on its
//     scheduled retry.
//   - waited.json: the same budget with WaitInWorkflow; the second call's
//     place is taken by a local activity, the workflow sleeps on a timer
//     until it matures, and the activity runs once. Replay it with
//     Options.Interceptor.WaitInWorkflow set, as the worker ran.
//   - retry_after.json: the provider answers 429 with retry-after: 1; the
//     next attempt comes a second later (tollgate.RateLimited).
//   - spend_cap.json: the provider reports a spend cap; the workflow fails
//     with tollgate.SpendCapReached.
//   - escalation.json and escalation_child.json: every call to the primary
//     is rate limited, the fourth 429 escalates, and the FallbackWorkflow
//     child (the second file) answers on the backup model.
//
// Re-record them from the module root after a change that is meant to alter
// the histories (the new workflow code must still replay the old ones in
// production: version the change with workflow.GetVersion first):
//
//	go run ./testsuite/internal/record -out testsuite/testdata
//
// Pass -only plain,spend_cap to re-record some. The recorder checks that each
// history shows its case before writing it.
//
// The subpackages are llmsim, a local provider with fault injection, and
// redistest, which starts a real redis-server for tests.
package testsuite
