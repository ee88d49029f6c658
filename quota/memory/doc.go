// Package memory is a quota.Store kept in one process's memory.
//
// It suits a single worker, tests, and the "local" failure policy of a fleet
// store. Every continuously refilling axis of a key (requests, tokens, input
// and output tokens per period) is a level dated at its last change, earned
// back at the axis's effective capacity per period and holding at most its
// burst (quota.Limit.Burst), as the Redis script keeps it; a charge lets the
// level go below zero (the capacity promised to queued tickets), and a
// refund never lifts it above the burst. Each such axis also has a start
// gate (gate.go), charged when a call is granted, that spaces the starts.
// Daily windows and concurrency leases are plain fields. An account's budget
// and the budgets of the tenants nested in it form one tree with one mutex
// and one table of tickets: every axis of every budget a call is charged to
// is decided under that mutex, so a Reserve is all or nothing, and accounts
// never contend with each other. The tickets queued for a saturated account
// wait in one line, shared by its tenants in weighted fair share (line.go).
//
// The behaviour is the one quota/quotatest asserts, shared with quota/redis.
package memory
