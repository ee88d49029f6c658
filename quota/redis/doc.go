// Package redis is a quota.Store kept in Redis and shared by every worker of
// a fleet.
//
// Each Store method is one Lua script run (EVALSHA, falling back to EVAL):
// the script reads the key's levels, decides and charges in one atomic step,
// so replicas never race and a decision costs one round trip. Snapshot's
// script only reads (EVALSHA_RO, or EVALSHA on a server that cannot run it
// read-only, see readonly.go). Redis TIME is the only clock, so replicas
// with skewed clocks still agree. The scripts are the files of lua/, one
// per method and the parts they share, each with a header naming its KEYS,
// ARGV and reply; their constants are written from Go (lua.go).
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
// A budget's state hash holds, per axis id a: l<a>/t<a> a bucket's level
// and the time it was computed at, w<a>/d<a> a daily (or monthly) window's start and
// the units used in it, r<a> after a loss the window ("start used") the views
// of the Stores that recovered it came to, c<a> an adopted effective capacity and o<a> the
// configured one it was adopted under (an adopted capacity counts only
// while the policy adopts and is configured so), g<a>/h<a> a bucket's start
// gate and the time it is dated at; and pu/pr the pause's end and reason,
// er/et/e1/e2 the learned estimate ratio, when it was learned and its last
// two samples, mb/mr the margin's burst and rate (the root's), ep the
// epoch, ef set while nobody can tell whether it replaced a lost one, pe the
// epoch a recovery replaced, rv/lp when the placeholders of the last
// recovery lapse and how many are left, fv/fq/fb the line's virtual time,
// arrival counter and tag bound, q1..q5 the cost in line per part, v the
// format version (formatVersion) and xu the records and members dropped as
// unreadable.
//
// A cost is written as its parts (requests, tokens, input and output
// tokens), the last followed by "$" and the call's spend (quota.Money) when
// it has a price: a fleet that meters no money writes what earlier releases
// read, and an earlier release drops (and counts as unreadable) the record
// of a priced call.
//
// Each budget's state hash (an account's, a tenant's) carries an epoch, a
// marker written when the hash is created, and each Store remembers the
// epoch of every budget it has charged, through any key (an account's own
// or a tenant's), with what it last saw of the budget's daily windows. A script run that finds the state gone (a restart
// without persistence, a flush, an eviction, a failover to an empty replica)
// although its Store saw an epoch restarts the budget conservatively:
// buckets empty and refilling at their rate, daily windows as used as that
// Store last saw them (and every other Store that saw the lost epoch adds,
// on its next call, what it saw beyond that; a window may still be granted
// what the Stores that come back last had not seen), every free concurrency slot held for the policy's
// LeaseTTL by a placeholder, which a call granted before the loss takes over
// when it renews or settles, provided the Store renewing or settling it was
// granted it in the epoch lost (a ticket that cannot prove so is unknown),
// and the account's line empty (its queued
// tickets are gone with their records; their callers are charged again
// when they come back). A Store that never saw the budget cannot tell its
// lost state from a new budget's; the first call of one that did ends the
// burst.
package redis
