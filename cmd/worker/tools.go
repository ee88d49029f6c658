package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/activity"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
)

// The tools the demo's agents are given, each an activity of its name
// (workflows.AgentInput.Tools): not LLM calls, so Tollgate does not govern
// them. The simulated models call each once, in order, then answer.
var demoTools = []activities.Tool{
	{
		Name:        "search_notes",
		Description: "Search the team's notes; returns the best-matching note.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for"}},"required":["query"]}`),
	},
	{
		Name:        "count_words",
		Description: "Count the words of a text.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"the text"}},"required":["query"]}`),
	},
}

// toolQuery is the arguments both tools take.
type toolQuery struct {
	Query string `json:"query"`
}

func (q *toolQuery) parse(call activities.ToolCall) error {
	if err := json.Unmarshal(call.Arguments, q); err != nil {
		return fmt.Errorf("%s: arguments %s are not {\"query\": text}: %w", call.Name, call.Arguments, err)
	}
	return nil
}

// searchNotes answers with a canned note about the query.
func searchNotes(ctx context.Context, call activities.ToolCall) (string, error) {
	var q toolQuery
	if err := q.parse(call); err != nil {
		return "", err
	}
	return fmt.Sprintf("note 17: %q — start small, measure, then widen the rollout.", q.Query), nil
}

// countWords counts the query's words.
func countWords(ctx context.Context, call activities.ToolCall) (string, error) {
	var q toolQuery
	if err := q.parse(call); err != nil {
		return "", err
	}
	return fmt.Sprintf(`{"words":%d}`, len(strings.Fields(q.Query))), nil
}

// registerTools registers the demo's tools on a worker.
func registerTools(r sdkworker.Registry) {
	r.RegisterActivityWithOptions(searchNotes, activity.RegisterOptions{Name: demoTools[0].Name})
	r.RegisterActivityWithOptions(countWords, activity.RegisterOptions{Name: demoTools[1].Name})
}
