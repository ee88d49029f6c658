package llmsim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/testsuite/llmsim"
)

// An OpenAI client, unmodified, against a simulator that allows one request
// per minute: the second call gets a 429 that says when to retry.
func Example() {
	sim, err := llmsim.New(llmsim.Config{
		Models: []llmsim.Model{{Provider: llmsim.OpenAI, Name: "gpt-4o", RequestsPerMinute: 1}},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-sim"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{
		Model:               "gpt-4o",
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hi")},
		MaxCompletionTokens: openai.Int(50),
	}
	c, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Choices[0].Message.Content, c.Usage.PromptTokens)

	_, err = client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Code, "retry-after", apiErr.Response.Header.Get("retry-after"))
	}
	fmt.Println(sim.Stats("gpt-4o").Accepted, sim.Stats("gpt-4o").TooManyRequests)
	// Output:
	// llmsim gpt-4o reply 87525363: Say hi 2
	// 429 rate_limit_exceeded retry-after 60
	// 1 1
}

// Faults make a test's failures exact: here, the next two calls for a model
// are refused with retry-after: 2, then calls succeed again.
func ExampleSim_Inject() {
	sim, err := llmsim.New(llmsim.Config{Models: []llmsim.Model{{Provider: llmsim.OpenAI, Name: "gpt-4o"}}})
	if err != nil {
		panic(err)
	}
	if err := sim.Inject(llmsim.Fault{Kind: llmsim.FaultRateLimit, Model: "gpt-4o", Times: 2, RetryAfter: 2 * time.Second}); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-sim"), option.WithMaxRetries(0))
	for i := 0; i < 3; i++ {
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			fmt.Println(apiErr.StatusCode, apiErr.Response.Header.Get("retry-after"))
		} else {
			fmt.Println("ok", err)
		}
	}
	// Output:
	// 429 2
	// 429 2
	// ok <nil>
}

// Standalone, from a file: serve until the context ends.
func ExampleLoadConfig() {
	cfg, err := llmsim.LoadConfig("testdata/example.yaml")
	if err != nil {
		panic(err)
	}
	sim, err := llmsim.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a real server would run until interrupted
	fmt.Println(len(cfg.Models), sim.ListenAndServe(ctx, "127.0.0.1:0"))
	// Output: 4 <nil>
}
