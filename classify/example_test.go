package classify_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tollgate/tollgate/classify"
)

// An Anthropic tier spend cap: a 429 that must not be retried, with the key
// closed until the 1st of next month.
func ExampleResponse() {
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	body := []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Your organization has reached its monthly usage limit.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`)

	v := classify.Response(http.StatusTooManyRequests, nil, body, now)
	fmt.Println(v.Class, v.Retryable, v.Code, v.ResetAt)
	// Output: spend_cap false enforced_spend_limit_reached 2026-04-01 00:00:00 +0000 UTC
}

// An OpenAI rate limit whose Retry-After is capped at the Classifier's
// maximum.
func ExampleClassifier_Response() {
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	header := http.Header{"Retry-After": {"120"}}
	body := []byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)

	c := classify.Classifier{MaxRetryAfter: 30 * time.Second}
	v := c.Response(http.StatusTooManyRequests, header, body, now)
	fmt.Println(v.Class, v.Axis, v.Retryable, v.RetryAfter, v.HasRetryAfter)
	// Output: rate_limited requests true 30s true
}

// The limits an OpenAI response reports, ready for quota.Store.Observe.
func ExampleLimits() {
	now := time.Date(2026, time.March, 14, 15, 9, 26, 0, time.UTC)
	header := http.Header{
		"X-Ratelimit-Limit-Tokens":     {"200000"},
		"X-Ratelimit-Remaining-Tokens": {"199000"},
		"X-Ratelimit-Reset-Tokens":     {"6m0s"},
	}
	for _, o := range classify.Limits(header, now) {
		fmt.Println(o.Axis, o.Limit, o.Remaining, o.Reset)
	}
	// Output: tokens 200000 199000 6m0s
}

// Your own activity's SDK client records its answers for Tollgate's
// interceptor when its HTTP client uses Transport and each call is made
// with the activity's context (which carries the Recorder); here a
// Recorder stands in for the interceptor's. With openai-go:
//
//	client := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: classify.Transport{}}))
//	resp, err := client.Chat.Completions.New(ctx, params) // ctx: the activity's
func ExampleTransport() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer provider.Close()
	client := &http.Client{Transport: classify.Transport{}}

	var rec classify.Recorder // the interceptor's, in a governed activity
	req, _ := http.NewRequestWithContext(classify.NewContext(context.Background(), &rec), http.MethodPost, provider.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	status, header, _ := rec.Last()
	fmt.Println(status, header.Get("Retry-After"))
	// Output: 429 7
}
