// Package failover keeps admission going, by an explicit policy, while a
// shared quota.Store (quota/redis) cannot be reached.
//
// A Store wraps the primary store and passes every call through while it
// answers. When a call fails with quota.ErrUnavailable the Store turns
// degraded and applies its Mode: Closed refuses every call with a short
// retry (Temporal keeps the work), Open admits every call unrecorded, and
// Local admits from an in-memory store holding this replica's share of each
// limit. A small circuit breaker then skips the primary for a cooldown, so
// an outage does not add a dial timeout to every call, and lets one probe
// through after it; the first success ends the degradation.
package failover
