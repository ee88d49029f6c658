// Package released is the previous release's Redis store, kept for the
// upgrade tests (quota/redis's upgrade_test.go and upgrade_state_test.go),
// which run it beside the current store on one Redis, as a fleet does in a
// rolling upgrade or a rollback. It is the store of commit d485ca0, its
// files args.go, doc.go, lua.go and store.go as they were there, with only
// this package clause, this paragraph and the references named below
// changed. It must not change: it stands for workers already deployed.
// When package quota moves or renames what it uses, adapt only the
// references, and say so here. Adapted so far: the store helpers that moved
// to quota/storekit (WrongTenantError, NoPolicyError, ValidateTicket,
// ValidateRenewal, ValidateObservations, the margin constants) and the typed
// quota.PauseReason (Pause's argument, the snapshot's and decision's
// reason). The script text is untouched.
//
// The rest of this comment is the previous release's package doc.
//
// Package redis is a quota.Store kept in Redis and shared by every worker of
// a fleet.
//
// Each Store method is one Lua script run (EVALSHA, falling back to EVAL):
// the script reads the key's levels, decides and charges in one atomic step,
// so replicas never race and a decision costs one round trip. Redis TIME is
// the only clock, so replicas with skewed clocks still agree.
//
// All the keys of one account share a Redis Cluster hash tag,
// {provider/account/model}: with the default prefix,
// tollgate:{openai/default/gpt-4o} holds the account's levels, pause and
// adopted capacities, …:leases its concurrency leases (a sorted set scored
// by expiry), …:queue the tickets queued and not yet granted (a sorted set
// scored by expiry, so a place that lapses unclaimed is refunded), …:line
// the tickets waiting for capacity in weighted fair-share order (scored by
// their tags), …:finish each tenant's latest tag while the line is busy,
// …:waiting what each tenant has in line, and …:t:<ticket> each ticket's
// record. A call that waits in line reads the tickets on the shorter side
// of its place (none for one at the front, where a ticket is when it
// matures, or at the back, where a burst queues): O(log queued + that). A tenant's own budget sits beside its
// account's, under the same tag: tollgate:{openai/default/gpt-4o}/vip, with
// …/vip/leases and …/vip/queue; its tickets are its account's (one
// namespace per account), so one script run reads and charges both budgets.
// A tenant whose account has no policy keeps its tickets too, …/vip/t/<ticket>.
// There is one state hash, one lease set and one queue per key with a
// policy, kept without a TTL; a line empties as its tickets go, and the
// finish hash expires once its line has been idle for a ticket's life. Expiry logic compares stored times with the
// script's clock; the TTL on ticket records only collects garbage, long
// after it could matter. Callers send durations (a pause of 5 s, a lease of
// 30 s), never times of their own: the script adds them to Redis TIME.
//
// Each budget's state hash (an account's, a tenant's) carries an epoch, a
// marker written when the hash is created, and each Store remembers the
// epoch of every budget it has reserved on, with what it last saw of the
// budget's daily windows. A script run that finds the state gone (a restart
// without persistence, a flush, an eviction, a failover to an empty replica)
// although its Store saw an epoch restarts the budget conservatively:
// buckets empty and refilling at their rate, daily windows as used as that
// Store last saw them, every free concurrency slot held for the policy's
// LeaseTTL by a placeholder, which a call granted before the loss takes over
// when it renews or settles, and the account's line empty (its queued
// tickets are gone with their records; their callers are charged again
// when they come back). A Store that never saw the budget cannot tell its
// lost state from a new budget's; the first call of one that did ends the
// burst.
package released
