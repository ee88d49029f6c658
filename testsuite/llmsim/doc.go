// Package llmsim is a local LLM provider for tests, benchmarks and demos. It
// speaks enough of OpenAI Chat Completions (POST /v1/chat/completions),
// Anthropic Messages (POST /v1/messages) and the Gemini API's generateContent
// (POST /v1beta/models/{model}:generateContent) for the official Go SDKs to
// work unmodified, and it limits calls the way those providers document:
//
//   - per account and model, continuously refilling buckets of requests and
//     tokens per minute (OpenAI charges max(max_tokens, ceil(chars/4)) against
//     tokens per minute; Anthropic charges ceil(chars/4) against input tokens
//     per minute and max_tokens against output tokens per minute; Gemini
//     charges ceil(chars/4) input tokens against tokens per minute), and a
//     requests-per-day window that resets at midnight UTC (at midnight
//     America/Los_Angeles for Gemini);
//   - a 429 with retry-after (whole seconds, rounded up) when a call does not
//     fit, and the provider's rate-limit headers (x-ratelimit-* or
//     anthropic-ratelimit-*) on every response for a known model; Gemini
//     instead answers 429 RESOURCE_EXHAUSTED with a google.rpc.QuotaFailure
//     naming the quota (…PerMinute… or …PerDay…) and a google.rpc.RetryInfo
//     retryDelay, and sends no limit headers;
//   - time compression: Model.Period refills the per-minute limits over a
//     shorter window (1s for a benchmark), with reset headers to match and
//     retry-after-ms next to the whole-second retry-after;
//   - short enforcement windows: with Model.Window, each per-minute limit is
//     also enforced over a fraction of its period, as providers say they may
//     (OpenAI and Anthropic: 60 RPM as 1 request a second; Azure OpenAI over
//     1 s or 10 s): a second, continuously refilling bucket holding
//     limit × Window/Period must admit the call too, a call larger than that
//     share is served from a full window and repaid before the next, and
//     the headers still report the per-minute bucket; Model.WindowShape
//     counts the window in another way (a fixed window reset on clock
//     boundaries, or a sliding log of the last window's calls), so a
//     governor cannot pass by mirroring one shape;
//   - a spend cap per account: once an account has used its tokens, every call
//     gets the provider's spend-cap error, with no retry-after;
//   - overload (Anthropic 529, OpenAI and Gemini 503) with a probability,
//     latency with a fixed part and a seeded random part (uniform, normal or
//     exponential), and faults a test triggers exactly (see Fault and
//     Sim.Inject);
//   - streaming (stream: true, OpenAI and Anthropic): server-sent events with
//     the providers' event names and a final usage chunk (OpenAI with
//     stream_options.include_usage), and mid-stream faults: a stall, a
//     dropped connection, an error event (see FaultStall, FaultDisconnect
//     and Fault.MidStream).
//
// Answers are deterministic: the text is derived from the prompt and the usage
// block reports input tokens as the model counts them (ceil(Density ×
// characters/4)) and output tokens no more than max_tokens. Sim counts what it did per model and per second (Stats,
// Series) and the calls it holds at once (InFlight, with its peak) so that
// tests and benchmarks can read it.
//
// Use it in tests through httptest:
//
//	sim, err := llmsim.New(cfg, llmsim.WithClock(clock))
//	srv := httptest.NewServer(sim)
//	// OpenAI: option.WithBaseURL(srv.URL + "/v1/"); Anthropic: option.WithBaseURL(srv.URL);
//	// Gemini: genai.HTTPOptions{BaseURL: srv.URL}
//
// or standalone with LoadConfig and Sim.ListenAndServe.
package llmsim
