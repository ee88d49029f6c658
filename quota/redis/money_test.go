package redis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/redis"
)

// priced is a call of 100 tokens that costs m.
func priced(m quota.Money) quota.Cost {
	return quota.Cost{Requests: 1, Tokens: 100, InputTokens: 80, OutputTokens: 20, Spend: int64(m)}
}

// TestMoneyBudgetAfterLoss: a tenant's monthly budget and its account's
// daily one, lost with Redis's state, are recovered from what the stores
// saw of them, as the daily windows are: no store grants what it knows was
// spent, and a new day of the same month keeps the month's spend.
func TestMoneyBudgetAfterLoss(t *testing.T) {
	tenant := gpt4o
	tenant.Tenant = "acme"
	e := newRecoveryEnvOf(t, map[quota.Key]quota.Policy{
		gpt4o:  {Limits: []quota.Limit{quota.DailySpend(quota.Dollars(10), nil)}},
		tenant: {Limits: []quota.Limit{quota.MonthlySpend(quota.Dollars(1), nil)}},
	})
	other := e.newStore()
	e.grantOn(e.store, tenant, "a", priced(quota.Dollars(0.60))) // e.store saw 0.60 of the month
	e.grantOn(other, tenant, "b", priced(quota.Dollars(0.30)))   // other saw 0.90
	losses[0].lose(t, e.srv)

	d := e.reserveOn(other, tenant, "c", priced(quota.Dollars(0.20)))
	require.Equal(t, quota.Refused, d.Outcome, "0.90 spent before the loss leaves 0.10: %+v", d)
	require.Equal(t, quota.BudgetSpent, d.Reason)
	require.Equal(t, quota.SpendPerMonth, d.Axis)
	require.Equal(t, tenant, d.Budget)
	e.grantOn(e.store, tenant, "c", priced(quota.Dollars(0.10)))
	d = e.reserveOn(e.store, tenant, "d", priced(1))
	require.Equal(t, quota.Refused, d.Outcome, "the month is spent: %+v", d)

	// A new day: the account's daily budget reopens, the tenant's month
	// does not, even after another loss (recovered first by the store that
	// saw all of it; a store recovers what it saw, see the README).
	e.clock.Advance(24 * time.Hour)
	losses[0].lose(t, e.srv)
	for _, s := range []*redis.Store{e.store, other} {
		d = e.reserveOn(s, tenant, "e", priced(1))
		require.Equal(t, quota.Refused, d.Outcome, "%+v", d)
		require.Equal(t, tenant, d.Budget)
	}
	e.grant(e.store, "untenanted", priced(quota.Dollars(10)))
	d = e.reserve(other, "untenanted-2", priced(1))
	require.Equal(t, quota.BudgetSpent, d.Reason, "%+v", d)
	require.Equal(t, gpt4o, d.Budget)
}

// TestPricedRecordFormat: a call with no price writes its ticket and queue
// member as earlier releases did (a fleet that meters no money can mix
// releases), and a priced one carries its spend after the output tokens.
func TestPricedRecordFormat(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 1, time.Second).WithBurst(time.Second),
		quota.MonthlySpend(quota.Dollars(1), nil)}})
	rdb := e.srv.Client()
	e.grant(e.store, "free", quota.Cost{Requests: 1})
	d := e.reserve(e.store, "priced", priced(1234))
	require.Equal(t, quota.Queued, d.Outcome, "%+v", d)
	require.Equal(t, int64(1234), d.Charged.Spend)

	records := map[string]string{}
	keys, err := rdb.Keys(e.ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		if v, err := rdb.Get(e.ctx, k).Result(); err == nil {
			records[k[strings.LastIndexAny(k, ":/")+1:]] = v
		}
	}
	require.Contains(t, records, "free")
	require.Len(t, strings.Fields(records["free"]), 12, "an unpriced record keeps the earlier form: %q", records["free"])
	require.NotContains(t, records["free"], "$")
	require.Contains(t, strings.Fields(records["priced"])[7], "$1234", "the spend follows the output tokens: %q", records["priced"])

	// Settled below its estimate, the priced call gives back the rest.
	e.clock.Advance(time.Second)
	e.grant(e.store, "priced", priced(1234))
	require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "priced", Actual: priced(1000)}))
	require.InDelta(t, float64(quota.Dollars(1)-1000), e.available(e.store, quota.SpendPerMonth), 1e-9)
}

// A priced call on a budget that limits no money writes the record of a
// call with no price, so a fleet with a price table but no money budget
// keeps the earlier release's format and an older worker reads it.
func TestPriceOnABudgetWithoutMoneyKeepsTheEarlierForm(t *testing.T) {
	e := newRecoveryEnv(t, quota.Policy{Limits: []quota.Limit{quota.Per(quota.Requests, 1, time.Second).WithBurst(time.Second)}})
	rdb := e.srv.Client()
	e.grant(e.store, "first", priced(1234))
	d := e.reserve(e.store, "priced", priced(1234))
	require.Equal(t, quota.Queued, d.Outcome, "%+v", d)

	keys, err := rdb.Keys(e.ctx, "*").Result()
	require.NoError(t, err)
	var seen int
	for _, k := range keys {
		typ, err := rdb.Type(e.ctx, k).Result()
		require.NoError(t, err)
		var vals []string
		switch typ {
		case "string":
			v, err := rdb.Get(e.ctx, k).Result()
			require.NoError(t, err)
			vals = []string{v}
		case "zset":
			vals, err = rdb.ZRange(e.ctx, k, 0, -1).Result()
			require.NoError(t, err)
		case "hash":
			h, err := rdb.HGetAll(e.ctx, k).Result()
			require.NoError(t, err)
			for _, v := range h {
				vals = append(vals, v)
			}
		}
		for _, v := range vals {
			seen++
			require.NotContains(t, v, "$", "key %s holds a priced part", k)
		}
	}
	require.Positive(t, seen, "the test read the store's records")

	e.clock.Advance(time.Second)
	e.grant(e.store, "priced", priced(1234))
	require.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: gpt4o, Ticket: "priced", Actual: priced(1000), Charged: priced(1234)}))
}
