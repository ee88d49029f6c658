package activities_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/classify"
	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// Complete against llmsim, reading the limits the call reported from the
// classify.Recorder the interceptor puts in the activity's context.
func ExampleActivities_Complete() {
	sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{
		{Provider: llmsim.Anthropic, Name: "claude-haiku-4-5", RequestsPerMinute: 50, InputTokensPerMinute: 20000, OutputTokensPerMinute: 4000},
	}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()

	acts, err := activities.New(activities.Config{
		Anthropic: activities.ProviderConfig{APIKey: "sk-from-worker-config", BaseURL: srv.URL},
	})
	if err != nil {
		panic(err)
	}
	rec := &classify.Recorder{}
	ctx := classify.NewContext(context.Background(), rec)
	resp, err := acts.Complete(ctx, activities.Request{
		Provider:        activities.Anthropic,
		Model:           "claude-haiku-4-5",
		Messages:        []activities.Message{{Role: activities.RoleUser, Content: "Name a prime."}},
		MaxOutputTokens: 200,
	})
	if err != nil {
		panic(err)
	}
	_, header, _ := rec.Last()
	fmt.Println(resp.FinishReason, resp.Usage.InputTokens)
	fmt.Println(header.Get("anthropic-ratelimit-requests-remaining"), header.Get("anthropic-ratelimit-output-tokens-remaining"))
	// Output:
	// end_turn 4
	// 49 3986
}

// The interceptor asks a governed request for its key and estimated cost.
func ExampleRequest_QuotaCharge() {
	req := activities.Request{
		Provider:        activities.OpenAI,
		Account:         "prod",
		Model:           "gpt-4o",
		Messages:        []activities.Message{{Role: activities.RoleUser, Content: "Summarise this 40-char line for me please"}},
		MaxOutputTokens: 256,
	}
	charge, err := req.QuotaCharge()
	if err != nil {
		panic(err)
	}
	fmt.Println(charge.Key, charge.Cost)
	// Output: openai/prod/gpt-4o requests=1 tokens=256 input_tokens=11 output_tokens=256
}
