package worker_test

import (
	"log"
	"os"

	"go.temporal.io/sdk/client"
	sdkinterceptor "go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/interceptor"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/memory"
	"github.com/tollgate/tollgate/workflows"
)

// Tollgate in an existing worker: build a store with your providers'
// limits, add the interceptor to worker.Options, and register the LLM
// activities and workflows as usual. The README shows this same code.
func Example_registerInterceptor() {
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// One budget per provider account and model: its published limits.
	policies, err := quota.NewPolicies(map[quota.Key]quota.Policy{
		{Provider: "openai", Model: "gpt-4o-mini"}: {
			Limits:   []quota.Limit{quota.PerMinute(quota.Requests, 500), quota.PerMinute(quota.Tokens, 200_000)},
			Headroom: 0.1,
		},
		{Provider: "openai", Model: "gpt-4o"}: {
			Limits: []quota.Limit{quota.PerMinute(quota.Requests, 500), quota.PerMinute(quota.Tokens, 30_000)},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	store, err := memory.New(policies, memory.Options{}) // redis.New(rdb, policies, redis.Options{}) for a fleet
	if err != nil {
		log.Fatal(err)
	}
	tollgate, err := interceptor.New(interceptor.Options{
		Store:     store,
		Fallbacks: map[string][]string{"openai/gpt-4o-mini": {"openai/gpt-4o"}},
	})
	if err != nil {
		log.Fatal(err)
	}

	w := worker.New(c, "agents", worker.Options{
		Interceptors: []sdkinterceptor.WorkerInterceptor{tollgate},
	})
	acts, err := activities.New(activities.Config{
		OpenAI: activities.ProviderConfig{APIKey: os.Getenv("OPENAI_API_KEY")},
	})
	if err != nil {
		log.Fatal(err)
	}
	activities.Register(w, acts)
	workflows.Register(w)
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}
