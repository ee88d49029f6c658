// Package redis is a quota.Store kept in Redis and shared by every worker of
// a fleet.
//
// Each Store method is one Lua script run (EVALSHA, falling back to EVAL):
// the script reads the key's levels, decides and charges in one atomic step,
// so replicas never race and a decision costs one round trip. Redis TIME is
// the only clock, so replicas with skewed clocks still agree.
//
// All the keys of one quota key share a Redis Cluster hash tag,
// {<key.String()>}: with the default prefix, tollgate:{openai/default/gpt-4o}
// holds the levels, pause and adopted capacities, …:leases the concurrency
// leases (a sorted set scored by expiry), …:queue the tickets queued and
// not yet granted (a sorted set scored by expiry, so a place that lapses
// unclaimed is refunded) and …:t:<ticket> each ticket's record. There is
// one state hash, one lease set and one queue per key with a policy, kept
// without a TTL. Expiry logic compares stored times with the script's
// clock; the TTL on ticket records only collects garbage, long after it
// could matter. Callers send durations (a pause of 5 s, a lease of 30 s),
// never times of their own: the script adds them to Redis TIME.
//
// A key's state hash carries an epoch, a marker written when the hash is
// created, and each Store remembers the epoch of every key it has reserved
// on, with what it last saw of the key's daily windows. A script run that
// finds the state gone (a restart without persistence, a flush, an
// eviction, a failover to an empty replica) although its Store saw an
// epoch restarts the key conservatively: buckets empty and refilling at
// their rate, daily windows as used as that Store last saw them, and every
// free concurrency slot held for the policy's LeaseTTL by a placeholder,
// which a call granted before the loss takes over when it renews or
// settles. A Store that never saw the key cannot tell its lost state from a
// new key's; the first call of one that did ends the burst.
package redis
