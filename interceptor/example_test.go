package interceptor_test

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/quota/quotatest"
)

// TranslateInput is a user's own LLM activity input. Implementing
// quota.Governed is all it takes for Tollgate to meter the activity.
type TranslateInput struct {
	Text, Language string
}

// QuotaCharge charges one request and a token estimate to the account's
// claude-haiku budget.
func (in TranslateInput) QuotaCharge() (quota.Charge, error) {
	return quota.Charge{
		Key:  quota.Key{Provider: "anthropic", Model: "claude-haiku"},
		Cost: quota.Cost{Requests: 1, Tokens: int64(len(in.Text))/4 + 256},
	}, nil
}

func Translate(ctx context.Context, in TranslateInput) (string, error) {
	// Call the provider here.
	return "[" + in.Language + "] " + in.Text, nil
}

func Summarize(ctx context.Context, doc string, maxWords int) (string, error) {
	// Call the provider here.
	return fmt.Sprintf("summary of %d characters in %d words", len(doc), maxWords), nil
}

// exampleStore is one account's budget: 100 requests and 10,000 tokens a
// minute on each model.
func exampleStore() quota.Store {
	budget := quota.Policy{Limits: []quota.Limit{quota.PerMinute(quota.Requests, 100).WithBurst(time.Minute), quota.PerMinute(quota.Tokens, 10_000).WithBurst(time.Minute)}}
	ps, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		{Provider: "anthropic", Model: "claude-haiku"}: budget,
		{Provider: "openai", Model: "gpt-4o-mini"}:     budget,
	})
	if err != nil {
		panic(err)
	}
	// A stopped clock keeps the printed levels exact; leave Clock nil in
	// real use.
	store, err := memory.New(ps, memory.Options{Clock: quotatest.NewClock(time.Now())})
	if err != nil {
		panic(err)
	}
	return store
}

func tokensLeft(store quota.Store, k quota.Key) float64 {
	snap, err := store.Snapshot(context.Background(), k)
	if err != nil {
		panic(err)
	}
	return snap.Axes[1].Available
}

// An activity whose input implements quota.Governed is metered with no
// configuration.
func ExampleNew_governedInput() {
	store := exampleStore()
	ic, err := interceptor.New(interceptor.Options{Store: store})
	if err != nil {
		panic(err)
	}

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	env.RegisterActivity(Translate)

	val, err := env.ExecuteActivity(Translate, TranslateInput{Text: "Good morning", Language: "pt"})
	if err != nil {
		panic(err)
	}
	var out string
	_ = val.Get(&out)
	fmt.Println(out)
	fmt.Println("tokens left:", tokensLeft(store, quota.Key{Provider: "anthropic", Model: "claude-haiku"}))
	fmt.Println("admitted:", ic.Stats().Admitted)
	// Output:
	// [pt] Good morning
	// tokens left: 9741
	// admitted: 1
}

// An activity whose signature you cannot change is governed by naming it in
// Options.Activities with a function that prices its arguments.
func ExampleOptions_activities() {
	store := exampleStore()
	ic, err := interceptor.New(interceptor.Options{
		Store: store,
		Activities: map[string]interceptor.ChargeFunc{
			"Summarize": func(args []any) (quota.Charge, error) {
				doc, maxWords := args[0].(string), args[1].(int)
				return quota.Charge{
					Key:  quota.Key{Provider: "openai", Model: "gpt-4o-mini"},
					Cost: quota.Cost{Requests: 1, Tokens: max(int64(len(doc))/4, int64(maxWords)*2)},
				}, nil
			},
		},
	})
	if err != nil {
		panic(err)
	}

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []sdkinterceptor.WorkerInterceptor{ic}})
	env.RegisterActivityWithOptions(Summarize, activity.RegisterOptions{Name: "Summarize"})

	val, err := env.ExecuteActivity("Summarize", "A long quarterly report…", 150)
	if err != nil {
		panic(err)
	}
	var out string
	_ = val.Get(&out)
	fmt.Println(out)
	fmt.Println("tokens left:", tokensLeft(store, quota.Key{Provider: "openai", Model: "gpt-4o-mini"}))
	// Output:
	// summary of 26 characters in 150 words
	// tokens left: 9700
}
