package quotatest

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

const (
	spd = quota.SpendPerDay
	spm = quota.SpendPerMonth
)

// spend is a priced call: one request, 100 tokens, m of money.
func spend(m quota.Money) quota.Cost {
	return quota.Cost{Requests: 1, Tokens: 100, InputTokens: 80, OutputTokens: 20, Spend: int64(m)}
}

func spent(wait time.Duration, axis quota.Axis, budget quota.Key) quota.Decision {
	return quota.Decision{Outcome: quota.Refused, Wait: wait, Reason: quota.BudgetSpent, Axis: axis, Budget: budget}
}

// endOfMonth is the time from start() to the next month in UTC.
func endOfMonth() time.Duration {
	return time.Date(2025, time.February, 1, 0, 0, 0, 0, time.UTC).Sub(start())
}

// testSpendBudget: a money budget is charged the call's price with its
// other axes, refuses (BudgetSpent, naming the budget and the wait to its
// reset) a call it has no room for, charges nothing then, takes back what
// Settle refunds, and refuses a call that has tokens but no price.
func testSpendBudget(t *testing.T, s suite) {
	e := s.setup(t, "spend-budget", quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(rq, 100).WithBurst(time.Minute), quota.MonthlySpend(quota.Dollars(1), nil)},
	})
	for i := range 10 {
		e.expect(granted, "t"+strconv.Itoa(i), spend(quota.Dollars(0.10)))
	}
	e.expect(spent(endOfMonth(), spm, e.key), "over", spend(quota.Dollars(0.10)))
	e.levels(map[quota.Axis]float64{spm: 0, rq: 90}) // the refusal charged nothing
	l := e.axis(spm)
	require.Equal(t, int64(quota.Dollars(1)), l.Capacity)
	requireTime(t, start().Add(endOfMonth()), l.ResetAt, "monthly reset")

	// Settled at its usage's price, a call gives back what its estimate
	// held beyond it; one that cost more takes the difference.
	e.settle("t0", spend(quota.Dollars(0.04)))
	e.level(spm, float64(quota.Dollars(0.06)))
	e.settle("t1", spend(quota.Dollars(0.11)))
	e.level(spm, float64(quota.Dollars(0.05)))
	e.expect(spent(endOfMonth(), spm, e.key), "big", spend(quota.Dollars(0.06)))
	e.expect(granted, "fits", spend(quota.Dollars(0.05)))
	e.level(spm, 0)

	// A cost with tokens and no price would be charged nothing: refused.
	_, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: "unpriced", Cost: tokens(10)})
	requireInvalid(t, err, "cost.spend")
	requireInvalid(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: "fits", Actual: tokens(10)}), "cost.spend")
	// A call above the whole budget can never fit.
	requireOversize(t, e, "huge", spend(quota.Dollars(2)), quota.Normal,
		quota.OversizeError{Key: e.key, Axis: spm, Cost: int64(quota.Dollars(2)), Capacity: int64(quota.Dollars(1))})
}

// testSpendConcurrent: 50 calls racing on a budget that fits 10 are granted
// exactly 10, and settling them at their usage's price leaves the budget
// spent by no more than their underestimates: what the budget holds is what
// was charged, whatever the interleaving.
func testSpendConcurrent(t *testing.T, s suite) {
	e := s.setup(t, "spend-race", quota.Policy{
		Limits: []quota.Limit{quota.PerMinute(rq, 1000).WithBurst(time.Minute), quota.DailySpend(quota.Dollars(1), nil)},
	})
	price := quota.Dollars(0.10)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var grants []string
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ticket := "t" + strconv.Itoa(i)
			d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: e.key, Ticket: ticket, Cost: spend(price)})
			if !assert.NoError(t, err) {
				return
			}
			switch d.Outcome {
			case quota.Granted:
				mu.Lock()
				grants = append(grants, ticket)
				mu.Unlock()
			case quota.Refused:
				assert.Equal(t, quota.BudgetSpent, d.Reason, "%s refused for %s", ticket, d.Reason)
			default:
				t.Errorf("%s: %s", ticket, d.Outcome)
			}
		}()
	}
	wg.Wait()
	require.Len(t, grants, 10, "grants on a budget of ten calls")
	e.level(spd, 0)

	// Settled concurrently, half at 7 millionths over their estimate and
	// half at 30 under: the budget holds exactly their sum.
	var want quota.Money
	for i, ticket := range grants {
		actual := price - 30
		if i%2 == 0 {
			actual = price + 7
		}
		want += actual
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, e.store.Settle(e.ctx, quota.Settlement{Key: e.key, Ticket: ticket, Actual: spend(actual)}))
		}()
	}
	wg.Wait()
	over := quota.Money(5 * 7) // the five underestimates
	require.LessOrEqual(t, want, quota.Dollars(1)+over)
	e.level(spd, float64(quota.Dollars(1)-want))
}

// testSpendReset: daily and monthly money budgets reopen at the start of
// their period in the limit's zone, not before.
func testSpendReset(t *testing.T, s suite) {
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	// 10:00 in Los Angeles on January 15th: its midnight is at 08:00 UTC
	// tomorrow, its February at 08:00 UTC on the 1st.
	day := time.Date(2025, time.January, 16, 8, 0, 0, 0, time.UTC).Sub(start())
	month := time.Date(2025, time.February, 1, 8, 0, 0, 0, time.UTC).Sub(start())

	d := s.setup(t, "spend-reset-day", quota.Policy{Limits: []quota.Limit{quota.DailySpend(quota.Dollars(0.20), la)}})
	d.expect(granted, "a", spend(quota.Dollars(0.20)))
	d.expect(spent(day, spd, d.key), "b", spend(quota.Dollars(0.01)))
	requireTime(t, start().Add(day), d.axis(spd).ResetAt, "daily reset")
	d.clock.Advance(day - time.Second)
	d.expect(spent(time.Second, spd, d.key), "b", spend(quota.Dollars(0.01)))
	d.clock.Advance(time.Second)
	d.expect(granted, "b", spend(quota.Dollars(0.20)))

	m := s.setup(t, "spend-reset-month", quota.Policy{Limits: []quota.Limit{quota.MonthlySpend(quota.Dollars(5), la)}})
	m.expect(granted, "a", spend(quota.Dollars(5)))
	m.expect(spent(month, spm, m.key), "b", spend(quota.Dollars(0.01)))
	m.clock.Advance(day) // a new day is not a new month
	m.expect(spent(month-day, spm, m.key), "b", spend(quota.Dollars(0.01)))
	m.clock.Advance(month - day)
	m.expect(granted, "b", spend(quota.Dollars(5)))
	requireTime(t, time.Date(2025, time.March, 1, 8, 0, 0, 0, time.UTC), m.axis(spm).ResetAt, "monthly reset")
}

// testSpendNested: a tenant's own money budget binds that tenant alone,
// its account's binds every tenant, and a refusal names the budget spent.
func testSpendNested(t *testing.T, s suite) {
	account := s.key("spend-nested")
	a, b := account, account
	a.Tenant, b.Tenant = "a", "b"
	e := s.setupKeys(t, account, map[quota.Key]quota.Policy{
		account: {Limits: []quota.Limit{quota.DailySpend(quota.Dollars(1), nil)}},
		a:       {Limits: []quota.Limit{quota.MonthlySpend(quota.Dollars(0.30), nil)}},
	}, start())
	reserve := func(k quota.Key, ticket string, m quota.Money) quota.Decision {
		d, err := e.store.Reserve(e.ctx, quota.Reservation{Key: k, Ticket: ticket, Cost: spend(m)})
		require.NoError(t, err)
		return d
	}
	requireDecision(t, granted, reserve(a, "a1", quota.Dollars(0.30)), "a1")
	requireDecision(t, spent(endOfMonth(), spm, a), reserve(a, "a2", quota.Dollars(0.01)), "a2")
	// b has no budget of its own: the account's has 0.70 left.
	requireDecision(t, granted, reserve(b, "b1", quota.Dollars(0.70)), "b1")
	midnight := time.Date(2025, time.January, 16, 0, 0, 0, 0, time.UTC).Sub(start())
	requireDecision(t, spent(midnight, spd, account), reserve(b, "b2", quota.Dollars(0.01)), "b2")
	// A new day reopens the account for b, not the month for a.
	e.clock.Advance(midnight)
	requireDecision(t, granted, reserve(b, "b2", quota.Dollars(0.01)), "b2")
	requireDecision(t, spent(endOfMonth()-midnight, spm, a), reserve(a, "a2", quota.Dollars(0.01)), "a2")
	snap, err := e.store.Snapshot(e.ctx, a)
	require.NoError(t, err)
	require.Equal(t, a, snap.Key)
	for _, l := range snap.Axes {
		if l.Axis == spm {
			require.InDelta(t, 0, l.Available, LevelDelta)
		}
	}
}
