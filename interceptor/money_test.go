package interceptor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/price"
	"github.com/tollgate/tollgate/quota/quotatest"
	"github.com/tollgate/tollgate/quota/redis"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/testsuite/redistest"
	"github.com/tollgate/tollgate/workflows"
)

// gptUPrice prices the unit tests' model: $2.50 in, $10 out per million.
var gptUPrice = price.Price{Input: quota.Dollars(2.50), Output: quota.Dollars(10)}

func unitPrices(t *testing.T) price.Table {
	t.Helper()
	ps, err := price.NewTable(map[string]price.Price{"openai/gpt-u": gptUPrice, "openai/gpt-backup": {Input: 1, Output: 1}})
	require.NoError(t, err)
	return ps
}

// reserves records the costs a store was asked to reserve and settle.
type reserves struct {
	quota.Store
	mu       sync.Mutex
	reserved []quota.Cost
	settled  []quota.Settlement
}

func (r *reserves) Reserve(ctx context.Context, res quota.Reservation) (quota.Decision, error) {
	r.mu.Lock()
	r.reserved = append(r.reserved, res.Cost)
	r.mu.Unlock()
	return r.Store.Reserve(ctx, res)
}

func (r *reserves) Settle(ctx context.Context, s quota.Settlement) error {
	r.mu.Lock()
	r.settled = append(r.settled, s)
	r.mu.Unlock()
	return r.Store.Settle(ctx, s)
}

// spendLeft is what k's budget on axis has left, as its snapshot says.
func spendLeft(t *testing.T, s quota.Store, k quota.Key, axis quota.Axis) quota.Money {
	t.Helper()
	snap, err := s.Snapshot(context.Background(), k)
	require.NoError(t, err)
	for _, l := range snap.Axes {
		if l.Axis == axis {
			return quota.Money(l.Available)
		}
	}
	t.Fatalf("%s has no %s axis", k, axis)
	return 0
}

func moneyUnit(t *testing.T, budget quota.Limit, opts interceptor.Options) (*unit, *reserves) {
	t.Helper()
	key := openaiKey("gpt-u")
	policies := map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerMinute(quota.Requests, 1000).WithBurst(time.Minute), budget}}}
	ps, err := quota.NewPolicies(policies)
	require.NoError(t, err)
	clock := quotatest.NewClock(time.Date(2026, time.March, 14, 15, 0, 0, 0, time.UTC))
	mem, err := memory.New(ps, memory.Options{Clock: clock})
	require.NoError(t, err)
	rec := &reserves{Store: mem}
	opts.Store, opts.Clock = rec, clock
	if opts.Prices.Len() == 0 {
		opts.Prices = unitPrices(t)
	}
	return newUnit(t, policies, opts), rec
}

// A priced call is charged its estimate's price on Reserve and settled at
// the price of what the provider billed; the budget keeps exactly that.
func TestPricedCallChargesItsEstimateAndSettlesItsUsage(t *testing.T) {
	budget := quota.Dollars(5)
	u, rec := moneyUnit(t, quota.MonthlySpend(budget, nil), interceptor.Options{})
	req := request("gpt-u")

	resp, err := u.complete(req)
	require.NoError(t, err)

	charge, err := req.QuotaCharge()
	require.NoError(t, err)
	require.Len(t, rec.reserved, 1)
	require.Equal(t, int64(gptUPrice.Estimate(charge.Cost)), rec.reserved[0].Spend, "charged the estimate's price")
	require.Positive(t, rec.reserved[0].Spend)

	used := gptUPrice.Spend(resp.QuotaBilled())
	require.Positive(t, used)
	require.Less(t, used, quota.Money(rec.reserved[0].Spend), "the answer is shorter than max_tokens")
	require.Len(t, rec.settled, 1)
	require.Equal(t, int64(used), rec.settled[0].Actual.Spend, "settled at the usage's price")
	require.Equal(t, budget-used, spendLeft(t, u.store, openaiKey("gpt-u"), quota.SpendPerMonth))
	require.Equal(t, used, u.ic.Stats().Spend)
}

// spendUntilRefused makes calls until the budget refuses one, returning
// how many calls ran before it and that refusal.
func spendUntilRefused(t *testing.T, u *unit) (ran int, refusal error) {
	t.Helper()
	for ran := range 50 {
		if _, err := u.complete(request("gpt-u")); err != nil {
			return ran, err
		}
	}
	t.Fatal("50 calls and the budget never ran out")
	return 0, nil
}

// Once a budget has no room for a call's price, the call fails at once,
// non-retryably, with BudgetExhausted naming the budget, its axis and its
// reset; the provider never sees it, and what ran stayed in the budget.
func TestSpentBudgetFailsWithItsReset(t *testing.T) {
	budget := quota.Dollars(0.004)
	u, rec := moneyUnit(t, quota.MonthlySpend(budget, nil), interceptor.Options{})

	ran, err := spendUntilRefused(t, u)
	require.GreaterOrEqual(t, ran, 3, "a call's estimate is a quarter of the budget")
	appErr := appError(t, err)
	require.Equal(t, tollgate.BudgetExhausted, appErr.Type(), "got %v", err)
	require.True(t, appErr.NonRetryable())
	key := openaiKey("gpt-u")
	require.ErrorContains(t, err, "budget "+key.String()+" (spend_per_month) is spent until 2026-04-01T00:00:00Z")
	var details tollgate.BudgetDetails
	require.NoError(t, appErr.Details(&details))
	require.Equal(t, tollgate.BudgetDetails{Budget: key.String(), Axis: "spend_per_month", ResetAt: time.Date(2026, time.April, 1, 0, 0, 0, 0, time.UTC)}, details)
	require.EqualValues(t, ran, u.sim.Stats("gpt-u").Received, "the refused call never reached the provider")
	require.EqualValues(t, 1, u.ic.Stats().BudgetSpent)

	var used quota.Money
	for _, s := range rec.settled {
		used += quota.Money(s.Actual.Spend)
	}
	require.LessOrEqual(t, used, budget)
	require.Equal(t, budget-used, spendLeft(t, u.store, key, quota.SpendPerMonth))
	require.Less(t, budget-used, quota.Money(rec.reserved[len(rec.reserved)-1].Spend), "refused for want of room")
}

// A budget listed in FallbackWhenSpent sends its calls to the fallback
// chain instead (the workflow interceptor then runs the backup model).
func TestSpentBudgetEscalatesWhenItFallsBack(t *testing.T) {
	u, _ := moneyUnit(t, quota.DailySpend(quota.Dollars(0.004), nil), interceptor.Options{
		Fallbacks:         map[string][]string{"openai/gpt-u": {"openai/gpt-backup"}},
		FallbackWhenSpent: []quota.Key{openaiKey("gpt-u")},
	})

	ran, err := spendUntilRefused(t, u)
	d, ok := tollgate.Escalation(err)
	require.True(t, ok, "got %v", err)
	require.Equal(t, "budget_spent", d.Reason)
	require.Equal(t, []string{"openai/gpt-backup"}, d.Backups)
	require.EqualValues(t, ran, u.sim.Stats("gpt-u").Received)
}

// A budget that limits money cannot charge a model the price table does not
// price: the call fails naming cost.spend, rather than running free.
func TestUnpricedModelOnAMoneyBudgetIsRefusedClearly(t *testing.T) {
	empty, err := price.NewTable(map[string]price.Price{"openai/other": gptUPrice})
	require.NoError(t, err)
	u, _ := moneyUnit(t, quota.MonthlySpend(quota.Dollars(5), nil), interceptor.Options{Prices: empty})

	_, err = u.complete(request("gpt-u"))
	appErr := appError(t, err)
	require.Equal(t, tollgate.InvalidRequest, appErr.Type())
	require.ErrorContains(t, err, "cost.spend")
	require.Zero(t, u.sim.Stats("gpt-u").Received)
}

// A burst of agents from three tenants of one account, each tenant with a
// monthly budget: "broke"'s runs out mid-burst and its later calls fail
// with BudgetExhausted; "thrifty"'s runs out too, and its later calls fall
// back to the cheaper model (FallbackWhenSpent); "rich" is untouched. Every
// budget keeps exactly the price of what its calls used, on the memory
// store and on Redis.
func TestTenantBudgetRunsOutMidBurst(t *testing.T) {
	const perTenant = 8
	gpt4o := price.Price{Input: quota.Dollars(2.50), Output: quota.Dollars(10)}
	mini := price.Price{Input: quota.Dollars(0.15), Output: quota.Dollars(0.60)}
	prices, err := price.NewTable(map[string]price.Price{"openai/gpt-4o": gpt4o, "openai/gpt-4o-mini": mini})
	require.NoError(t, err)
	// A call's estimate is about $0.0007 (64 answer tokens at gpt-4o's
	// price and the prompt), its usage about half: a small budget holds
	// two or three of a tenant's burst at once.
	small, large := quota.Dollars(0.002), quota.Dollars(100)
	budgets := map[string]quota.Money{"broke": small, "thrifty": small, "rich": large}
	policies := map[quota.Key]quota.Policy{openaiKey("gpt-4o"): generous(), openaiKey("gpt-4o-mini"): generous()}
	for tenant, m := range budgets {
		policies[tenantKey("gpt-4o", tenant)] = quota.Policy{Limits: []quota.Limit{quota.MonthlySpend(m, nil)}}
	}

	for _, st := range []struct {
		name  string
		store func(t *testing.T) quota.Store
	}{
		{"memory", func(t *testing.T) quota.Store { return memoryStore(t, policies) }},
		{"redis", func(t *testing.T) quota.Store {
			ps, err := quota.NewPolicies(policies)
			require.NoError(t, err)
			s, err := redis.New(redistest.StartServer(t).Client(), ps, redis.Options{})
			require.NoError(t, err)
			return s
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			e := newEnv(t, llmsim.Config{Models: simModels("gpt-4o", "gpt-4o-mini")})
			store := st.store(t)
			ic, sl := e.startWorker(interceptor.Options{
				Store:             store,
				Prices:            prices,
				Fallbacks:         map[string][]string{"openai/gpt-4o": {"openai/gpt-4o-mini"}},
				FallbackWhenSpent: []quota.Key{tenantKey("gpt-4o", "thrifty")},
			})

			// The burst reaches the store at once, however slowly this
			// machine starts workflows.
			sl.gate.Store(newGate(3 * perTenant))
			type outcome struct {
				tenant string
				out    workflows.AgentResult
				err    error
			}
			var runs []client.WorkflowRun
			var tenants []string
			for _, tenant := range []string{"broke", "thrifty", "rich"} {
				for i := range perTenant {
					in := agent("gpt-4o")
					in.Tenant = tenant
					runs = append(runs, e.start(fmt.Sprintf("%s-%d", tenant, i), in))
					tenants = append(tenants, tenant)
				}
			}
			outcomes := make([]outcome, len(runs))
			var wg sync.WaitGroup
			for i, run := range runs {
				wg.Go(func() {
					out, err := e.result(run)
					outcomes[i] = outcome{tenants[i], out, err}
				})
			}
			wg.Wait()

			spentOn := map[string]quota.Money{} // gpt-4o's price of what each tenant's calls used
			answered, refused, fellBack := map[string]int{}, map[string]int{}, map[string]int{}
			for _, o := range outcomes {
				if o.err != nil {
					require.True(t, tollgate.IsType(o.err, tollgate.BudgetExhausted), "%s: %v", o.tenant, o.err)
					refused[o.tenant]++
					continue
				}
				answered[o.tenant]++
				for _, turn := range o.out.Turns {
					switch turn.Model {
					case "gpt-4o":
						spentOn[o.tenant] += gpt4o.Spend(turn.QuotaBilled())
					case "gpt-4o-mini":
						fellBack[o.tenant]++
					}
				}
			}

			t.Logf("answered %v, refused %v, fell back %v, gpt-4o spend %v", answered, refused, fellBack, spentOn)
			require.Positive(t, answered["broke"], "broke's budget held some calls")
			require.Positive(t, refused["broke"], "broke's budget ran out mid-burst")
			require.Equal(t, perTenant, answered["broke"]+refused["broke"])
			require.Equal(t, perTenant, answered["thrifty"], "thrifty's calls fell back instead of failing")
			require.Positive(t, fellBack["thrifty"])
			require.Equal(t, perTenant, answered["rich"], "rich is untouched")
			require.Zero(t, fellBack["rich"])
			require.Zero(t, fellBack["broke"])
			for tenant, m := range budgets {
				require.LessOrEqual(t, spentOn[tenant], m, tenant)
				require.Equal(t, m-spentOn[tenant], spendLeft(t, store, tenantKey("gpt-4o", tenant), quota.SpendPerMonth),
					"%s's budget keeps the price of what its calls used", tenant)
			}
			require.EqualValues(t, refused["broke"]+fellBack["thrifty"], ic.Stats().BudgetSpent)
		})
	}
}
