package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/testsuite/llmsim"
	"github.com/tollgate/tollgate/workflows"
)

// scenario is one recorded run: the provider and budgets it runs against,
// the AgentWorkflow it starts, and what its history must show for the
// fixture to be worth keeping.
type scenario struct {
	// name is the fixture's file name without ".json"; the workflow id too.
	name string
	sim  llmsim.Config
	// policies are the memory store's budgets.
	policies  map[quota.Key]quota.Policy
	fallbacks map[string][]string
	// waitInWorkflow sets interceptor.Options.WaitInWorkflow.
	waitInWorkflow bool
	input          workflows.AgentInput
	// fails is the Tollgate error type the workflow must fail with; empty
	// means it must complete.
	fails string
	// check reports what is wrong with the workflow's history, or nil.
	check func(events []*historypb.HistoryEvent) error
	// child, when set, names the fixture of the FallbackWorkflow child the
	// run must start; its history is recorded beside the parent's.
	child string
}

// scenarios are the histories committed under testsuite/testdata.
func scenarios() []scenario {
	return []scenario{
		{
			name:     "plain",
			sim:      llmsim.Config{Models: openaiModels("gpt-plain")},
			policies: map[quota.Key]quota.Policy{openaiKey("gpt-plain"): generous()},
			input:    agent("gpt-plain", lookupTool),
			check: func(events []*historypb.HistoryEvent) error {
				return wantAttempts(events, 1, 1, 1)
			},
		},
		{
			// One request per 2 s: turn 1 takes the only token, the tool
			// runs, and turn 2 is refused once and admitted when its
			// reserved place matures.
			name:     "refused",
			sim:      llmsim.Config{Models: openaiModels("gpt-refused")},
			policies: map[quota.Key]quota.Policy{openaiKey("gpt-refused"): {Limits: []quota.Limit{quota.Per(quota.Requests, 1, 2*time.Second)}}},
			input:    agent("gpt-refused", lookupTool),
			check: func(events []*historypb.HistoryEvent) error {
				if err := wantAttempts(events, 1, 1, 2); err != nil {
					return err
				}
				return wantLastFailure(events, 2, tollgate.QuotaRefused)
			},
		},
		{
			// The "refused" budget with WaitInWorkflow: turn 2 waits on a
			// timer in the workflow and its activity runs once.
			name:           "waited",
			sim:            llmsim.Config{Models: openaiModels("gpt-waited")},
			policies:       map[quota.Key]quota.Policy{openaiKey("gpt-waited"): {Limits: []quota.Limit{quota.Per(quota.Requests, 1, 2*time.Second)}}},
			waitInWorkflow: true,
			input:          agent("gpt-waited", lookupTool),
			check: func(events []*historypb.HistoryEvent) error {
				if err := wantAttempts(events, 1, 1, 1); err != nil {
					return err
				}
				return wantEvents(events, enumspb.EVENT_TYPE_TIMER_STARTED, 1)
			},
		},
		{
			name: "retry_after",
			sim: llmsim.Config{
				Models: openaiModels("gpt-429"),
				Faults: []llmsim.Fault{{Kind: llmsim.FaultRateLimit, Model: "gpt-429", Times: 1, RetryAfter: time.Second}},
			},
			policies: map[quota.Key]quota.Policy{openaiKey("gpt-429"): generous()},
			input:    agent("gpt-429"),
			check: func(events []*historypb.HistoryEvent) error {
				if err := wantAttempts(events, 2); err != nil {
					return err
				}
				return wantLastFailure(events, 0, tollgate.RateLimited)
			},
		},
		{
			name: "spend_cap",
			sim: llmsim.Config{
				Models: openaiModels("gpt-capped"),
				Faults: []llmsim.Fault{{Kind: llmsim.FaultSpendCap, Model: "gpt-capped"}},
			},
			policies: map[quota.Key]quota.Policy{openaiKey("gpt-capped"): generous()},
			input:    agent("gpt-capped"),
			fails:    tollgate.SpendCapReached,
			check: func(events []*historypb.HistoryEvent) error {
				return wantAttempts(events, 1)
			},
		},
		{
			// Every call to the primary is rate limited: the 4th 429
			// escalates and a FallbackWorkflow child answers on the backup.
			name: "escalation",
			sim: llmsim.Config{
				Models: append(openaiModels("gpt-primary"), llmsim.Model{
					Provider: llmsim.Anthropic, Name: "claude-backup",
					RequestsPerMinute: 10_000, InputTokensPerMinute: 1_000_000, OutputTokensPerMinute: 1_000_000,
				}),
				Faults: []llmsim.Fault{{Kind: llmsim.FaultRateLimit, Model: "gpt-primary", RetryAfter: time.Second}},
			},
			policies: map[quota.Key]quota.Policy{
				openaiKey("gpt-primary"):                        generous(),
				{Provider: "anthropic", Model: "claude-backup"}: generous(),
			},
			fallbacks: map[string][]string{"openai/gpt-primary": {"anthropic/claude-backup"}},
			input:     agent("gpt-primary"),
			child:     "escalation_child",
			check: func(events []*historypb.HistoryEvent) error {
				if err := wantAttempts(events, 4); err != nil {
					return err
				}
				return wantLastFailure(events, 0, tollgate.RateLimited)
			},
		},
	}
}

func openaiModels(names ...string) []llmsim.Model {
	var ms []llmsim.Model
	for _, n := range names {
		ms = append(ms, llmsim.Model{Provider: llmsim.OpenAI, Name: n, RequestsPerMinute: 10_000, TokensPerMinute: 10_000_000})
	}
	return ms
}

func openaiKey(model string) quota.Key { return quota.Key{Provider: "openai", Model: model} }

// generous is a policy that never binds.
func generous() quota.Policy {
	return quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 10_000), quota.PerMinute(quota.Tokens, 10_000_000)}}
}

// agent is an AgentWorkflow's input with the given tools: the model calls
// each once, then answers.
func agent(model string, tools ...activities.Tool) workflows.AgentInput {
	return workflows.AgentInput{Provider: "openai", Model: model, Task: "Plan a trip to Lisbon.", Tools: tools, MaxOutputTokens: 64}
}

// lookupTool is the tool the two-turn agents call.
var lookupTool = activities.Tool{
	Name:       "lookup",
	Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`),
}

// lookup is lookupTool's activity.
func lookup(ctx context.Context, call activities.ToolCall) (string, error) {
	return `{"city":"Lisbon","days":3}`, nil
}

// attempts returns, per activity in scheduling order, the attempt number of
// its last start and the type of the failure that preceded it.
func attempts(events []*historypb.HistoryEvent) (n []int32, lastFailure []string) {
	byID := map[int64]int{}
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			byID[ev.GetEventId()] = len(n)
			n = append(n, 0)
			lastFailure = append(lastFailure, "")
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			i := byID[a.GetScheduledEventId()]
			n[i] = a.GetAttempt()
			lastFailure[i] = a.GetLastFailure().GetApplicationFailureInfo().GetType()
		}
	}
	return n, lastFailure
}

// wantAttempts reports an error unless the history's activities took
// exactly the given numbers of attempts.
func wantAttempts(events []*historypb.HistoryEvent, want ...int32) error {
	got, _ := attempts(events)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("activity attempts are %v, want %v", got, want)
	}
	return nil
}

// wantLastFailure reports an error unless activity i's last attempt followed
// a failure of type errType.
func wantLastFailure(events []*historypb.HistoryEvent, i int, errType string) error {
	_, last := attempts(events)
	if i >= len(last) || last[i] != errType {
		return fmt.Errorf("activity %d's last attempt did not follow a %q failure (last failures: %q)", i, errType, last)
	}
	return nil
}

// wantEvents reports an error unless the history holds n events of type t.
func wantEvents(events []*historypb.HistoryEvent, t enumspb.EventType, n int) error {
	got := 0
	for _, ev := range events {
		if ev.GetEventType() == t {
			got++
		}
	}
	if got != n {
		return fmt.Errorf("%d %s events, want %d", got, t, n)
	}
	return nil
}
