// Package quota holds the budgets an LLM provider meters an account by and the
// Store that keeps them for a whole fleet of workers.
//
// A provider limits each account on several axes at once: requests and tokens
// per minute (continuously refilling token buckets), requests and tokens per
// day (fixed windows that reset at midnight in a time zone), and concurrent
// calls (leases). A Policy lists the Limits of one Key (provider, account,
// model and, optionally, a tenant: one of your customers, whose own budget
// nests inside its account's and who shares a saturated account with the
// others by weight, see Policies). A Store charges a call's estimated Cost
// against every axis of its key at once, all or nothing, under a ticket: a
// stable id for the caller that makes Reserve idempotent, so a caller that is
// told to come back later keeps its place in line instead of competing again.
// TicketFor makes one of fixed length from any identity. A grant lives for a
// TTL the caller renews while its call runs (Store.Renew); times are the
// store's own, so callers pass durations, never times read from their clock.
//
// Two Stores live in subpackages: quota/memory, for one process, and
// quota/redis, shared by every worker of a fleet. quota/quotatest is the
// conformance suite both pass, usable by anyone writing a third.
package quota
