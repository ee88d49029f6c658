package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// BenchmarkCachedAgents runs cached tool-using agents against an Anthropic
// input-tokens-per-minute limit, in simulated time (one clock shared by
// llmsim and the memory store; real SDK calls over HTTP), and reports
// goodput: the uncached input tokens (input_tokens plus cache writes, what
// Anthropic's ITPM counts) the provider accepted per minute after the
// agents' cold starts, over its ITPM. "warm" charges as Tollgate does now (the prefix the previous
// turn sent is expected from the cache); "whole" charges the whole prompt
// at characters/4, as before, with the ratio learned down to its floor.
func BenchmarkCachedAgents(b *testing.B) {
	for _, warm := range []bool{true, false} {
		name := "whole"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			var goodput float64
			var rejected int64
			for b.Loop() {
				goodput, rejected = runCachedAgents(b, warm)
			}
			b.ReportMetric(goodput, "goodput")
			b.ReportMetric(float64(rejected), "429s")
		})
	}
}

const (
	agentITPM    = 200_000
	agentCount   = 20
	agentMinutes = 10
	// agentWarmup is left out of goodput: every agent's first call writes
	// its whole context to the cache, a burst that fills the first minutes
	// whatever the charging.
	agentWarmup = 2 * time.Minute
)

func runCachedAgents(b *testing.B, warm bool) (goodput float64, rejected int64) {
	b.Helper()
	ctx := context.Background()
	clock := llmsim.NewManualClock(time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC))
	sim, err := llmsim.New(llmsim.Config{
		Models:   []llmsim.Model{{Provider: llmsim.Anthropic, Name: "claude-agent", RequestsPerMinute: 10_000, InputTokensPerMinute: agentITPM, OutputTokensPerMinute: 1_000_000}},
		Accounts: []llmsim.Account{{Name: "acct", APIKey: "k"}},
	}, llmsim.WithClock(clock))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	acts, err := activities.New(activities.Config{Anthropic: activities.ProviderConfig{APIKey: "k", BaseURL: srv.URL, HTTPClient: srv.Client(), Timeout: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	key := quota.Key{Provider: activities.Anthropic, Account: "acct", Model: "claude-agent"}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{key: {Limits: []quota.Limit{quota.PerMinute(quota.InputTokens, agentITPM)}}})
	if err != nil {
		b.Fatal(err)
	}
	store, err := memory.New(ps, memory.Options{Clock: clock})
	if err != nil {
		b.Fatal(err)
	}

	type agent struct {
		req     activities.Request
		ready   time.Time
		granted bool
		ticket  string
		prompt  int64
		turn    int
	}
	tools := []activities.Tool{{Name: "search", Description: "Search the notes.", Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string"}}}`)}}
	system := strings.Repeat("Context the agent keeps. ", 8000) // 200,000 characters: 50,000 tokens
	agents := make([]*agent, agentCount)
	for i := range agents {
		agents[i] = &agent{ready: clock.Now(), req: activities.Request{
			Provider: activities.Anthropic, Account: "acct", Model: "claude-agent",
			System: fmt.Sprintf("Agent %d. %s", i, system), MaxOutputTokens: 100, Tools: tools,
			Messages: []activities.Message{{Role: activities.RoleUser, Content: strings.Repeat("task ", 1600)}},
			Caching:  activities.Caching{On: true},
		}}
	}
	start := clock.Now()
	end := start.Add(agentMinutes * time.Minute)
	var before llmsim.Stats // at agentWarmup
	for {
		next := agents[0]
		for _, a := range agents[1:] {
			if a.ready.Before(next.ready) {
				next = a
			}
		}
		if !next.ready.Before(end) {
			break
		}
		if before.Received == 0 && !next.ready.Before(start.Add(agentWarmup)) {
			before = sim.Stats("claude-agent")
		}
		if d := next.ready.Sub(clock.Now()); d > 0 {
			clock.Advance(d)
		}
		a := next
		if !a.granted {
			charge, err := a.req.QuotaCharge()
			if err != nil {
				b.Fatal(err)
			}
			a.ticket = quota.TicketFor("bench", a.req.System[:9], fmt.Sprint(a.turn))
			a.prompt = charge.Prompt
			d, err := store.Reserve(ctx, quota.Reservation{Key: key, Ticket: a.ticket, Cost: charge.Cost, Prompt: charge.Prompt})
			if err != nil {
				b.Fatal(err)
			}
			if d.Outcome != quota.Granted {
				a.ready = clock.Now().Add(max(d.Wait, time.Millisecond))
				continue
			}
			a.granted = true
			if d.Start > 0 {
				a.ready = clock.Now().Add(d.Start)
				continue
			}
		}
		resp, err := acts.Complete(ctx, a.req)
		if err != nil {
			b.Fatalf("agent call: %v", err)
		}
		if err := store.Settle(ctx, quota.Settlement{Key: key, Ticket: a.ticket, Actual: resp.QuotaUsage(), Counted: true, Prompt: a.prompt}); err != nil {
			b.Fatal(err)
		}
		a.granted = false
		a.turn++
		sent := len(a.req.Messages)
		a.req.Messages = append(a.req.Messages, resp.Message())
		if len(resp.ToolCalls) > 0 {
			a.req.Messages = append(a.req.Messages, activities.Message{Role: activities.RoleTool,
				ToolResults: []activities.ToolResult{{CallID: resp.ToolCalls[0].ID, Content: strings.Repeat("result ", 1100)}}})
		} else {
			a.req.Messages = append(a.req.Messages, activities.Message{Role: activities.RoleUser, Content: strings.Repeat("more ", 1500)})
		}
		if warm {
			a.req.Caching.Warm = sent
		}
		a.ready = clock.Now().Add(2 * time.Second) // the tool runs
	}
	st := sim.Stats("claude-agent")
	uncached := (st.InputTokens - st.CacheReadTokens) - (before.InputTokens - before.CacheReadTokens)
	minutes := float64(agentMinutes*time.Minute-agentWarmup) / float64(time.Minute)
	return float64(uncached) / minutes / agentITPM, st.TooManyRequests
}
