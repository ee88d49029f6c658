package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/pool"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// A pool run (-pool N) has each setup's model served by a pool of N
// members (pool.Set): N accounts of the provider, each with its own key
// and the whole limit, which llmsim enforces per account. The agents call
// the pool's model; Tollgate admits each call on the member that can run
// it soonest and runs it with that member's key. Halfway through the load
// the first member's account runs out of credit (llmsim.Sim.CapSpend): its
// calls get the spend-cap error, Tollgate closes it, and its share must
// move to the others with no workflow failing. Goodput is measured against
// the members' summed limit while each was open.

// poolDefinitions are printed after definitions in a pool run.
const poolDefinitions = `  pool run      goodput's capacity is the members' summed limit while each was open: every
                member's allowance over the window, but the capped member's only until its cap.
                429/100 counts rate-limit 429s; the capped member's spend-cap answers (also 429s
                on the wire) are counted apart.`

// memberAccount is the account of pool member i of the setup calling
// model (each setup its own, so that one's spend cap is not the next's);
// memberAPIKey is its key.
func memberAccount(model string, i int) string { return fmt.Sprintf("%s-member-%d", model, i) }
func memberAPIKey(model string, i int) string  { return "sk-" + memberAccount(model, i) }

// memberKey is pool member i's key for the setup's model.
func memberKey(i int, model string) quota.Key {
	return quota.Key{Provider: activities.Anthropic, Account: memberAccount(model, i), Model: model}
}

// budgets returns the policies of the setup's model and, in a pool run
// (l.Pool members), the pool serving it: one member per account, each with
// the provider's limit.
func budgets(l limits, model string) (quota.Policies, pool.Set, error) {
	if l.Pool == 0 {
		ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{{Provider: activities.Anthropic, Model: model}: l.policy()})
		return ps, pool.Set{}, err
	}
	m := make(map[quota.Key]quota.Policy, l.Pool)
	members := make([]quota.Key, l.Pool)
	for i := range members {
		members[i] = memberKey(i, model)
		m[members[i]] = l.policy()
	}
	ps, err := quota.NewPolicies(m)
	if err != nil {
		return ps, pool.Set{}, err
	}
	pools, err := pool.New(ps, map[quota.Key][]quota.Key{{Provider: activities.Anthropic, Model: model}: members})
	return ps, pools, err
}

// activitiesConfig is a replica's activities: the provider with the
// benchmark's key and, in a pool run, every member's account with its own.
func activitiesConfig(pool int, model, simURL string, transport http.RoundTripper) activities.Config {
	hc := &http.Client{Transport: transport}
	cfg := activities.Config{Anthropic: activities.ProviderConfig{APIKey: apiKey, BaseURL: simURL, HTTPClient: hc}}
	for i := range pool {
		cfg.Accounts = append(cfg.Accounts, activities.AccountConfig{Provider: activities.Anthropic, Account: memberAccount(model, i),
			Config: activities.ProviderConfig{APIKey: memberAPIKey(model, i), BaseURL: simURL, HTTPClient: hc}})
	}
	return cfg
}

// simAccounts are llmsim's accounts in a pool run: the benchmark's own key
// and one per member of each setup's model; none (any key) otherwise.
func simAccounts(pool int, models []string) []llmsim.Account {
	if pool == 0 {
		return nil
	}
	accts := []llmsim.Account{{Name: "fleet", APIKey: apiKey}}
	for _, m := range models {
		for i := range pool {
			accts = append(accts, llmsim.Account{Name: memberAccount(m, i), APIKey: memberAPIKey(m, i)})
		}
	}
	return accts
}

// poolLog is what a pool run saw of its members: the tokens each account
// had used when the first was capped and when the window closed.
type poolLog struct {
	model         string
	capAt, window time.Duration
	atCap, atEnd  []int64
}

// capFault is the pool run's fault: halfway through the load, member 0's
// account runs out of credit. It records every member's spend then.
func (b *bench) capFault(log *poolLog) fault {
	log.capAt, log.window = b.window/2, b.window
	return fault{at: b.window / 2, do: func(context.Context, time.Time) error {
		log.atCap = b.memberSpend(log.model)
		if !b.sim.CapSpend(memberAccount(log.model, 0)) {
			return fmt.Errorf("llmsim has no account %s", memberAccount(log.model, 0))
		}
		return nil
	}}
}

// memberSpend returns the tokens each member's account has used.
func (b *bench) memberSpend(model string) []int64 {
	out := make([]int64, b.limits.Pool)
	for i := range out {
		out[i] = b.sim.Spent(memberAccount(model, i))
	}
	return out
}

// allowances is how many members' worth of the limit the window offered:
// every member's whole window but member 0's, which was open until capAt.
func (p *poolLog) allowances(l limits) float64 {
	open := allowance(1, l.Period, l.enforcement(), p.capAt) / allowance(1, l.Period, l.enforcement(), p.window)
	return float64(l.Pool-1) + open
}

// String reports each member's tokens per second before and after the cap.
func (p *poolLog) String() string {
	if p.atCap == nil || p.atEnd == nil {
		return "the cap was not reached"
	}
	var parts []string
	for i := range p.atCap {
		before := float64(p.atCap[i]) / p.capAt.Seconds()
		after := float64(p.atEnd[i]-p.atCap[i]) / (p.window - p.capAt).Seconds()
		parts = append(parts, fmt.Sprintf("member %d %.0f → %.0f", i, before, after))
	}
	return fmt.Sprintf("member 0 spend-capped at %s; tokens/s per member before → after: %s",
		p.capAt.Round(100*time.Millisecond), strings.Join(parts, ", "))
}
