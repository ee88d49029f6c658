// Package interceptor is Tollgate's Temporal worker interceptor: the governor
// between an agent workflow and the LLM provider.
//
// Activity side: before a governed activity runs, its estimated cost is
// reserved on the shared quota.Store. A call that must wait ends its attempt
// at once with a retryable tollgate.QuotaRefused whose NextRetryDelay is the
// wait, so the Temporal server holds the wait and no worker slot does; the
// caller's place in line is kept under a ticket, a digest of the activity's
// identity, so its next attempt is admitted without competing again. While
// the call runs its grant and concurrency lease are renewed, for the TTL its
// heartbeat or StartToClose timeout suggests. After the call the actual
// usage is settled, the provider's reported limits are fed back to the
// store, and the provider's answer is classified: rate limits retry as the
// provider said (pausing the key for every replica), spend caps fail for
// good and close the key until its reset, and repeated rate limiting
// escalates to a backup model. A provider limits accounts, not the tenants
// a product splits them into: a tenant's call pauses or closes its
// account's budget, stopping every tenant nested in it (its own budget
// when the account has no policy).
//
// Workflow side: a governed activity call that fails with
// tollgate.RateLimitEscalation is resolved by a FallbackWorkflow child that
// runs the same input on the backup chain, so workflow code just calls the
// activity.
package interceptor
