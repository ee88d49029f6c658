// Package memory is a quota.Store kept in one process's memory.
//
// It suits a single worker, tests, and the "local" failure policy of a fleet
// store. Every continuously refilling axis of a key (requests, tokens, input
// and output tokens per period) is a golang.org/x/time/rate.Limiter whose
// rate is the axis's effective capacity per period and whose burst is that
// capacity; a charge is ReserveN, which lets the level go below zero (the
// capacity promised to queued tickets), and a refund is ReserveN with a
// negative count, which the limiter caps at its burst on the next read.
// Daily windows and concurrency leases are plain fields. An account's budget
// and the budgets of the tenants nested in it form one tree with one mutex
// and one table of tickets: every axis of every budget a call is charged to
// is decided under that mutex, so a Reserve is all or nothing, and accounts
// never contend with each other. The tickets queued for a saturated account
// wait in one line, shared by its tenants in weighted fair share (line.go).
//
// The behaviour is the one quota/quotatest asserts, shared with quota/redis.
package memory
