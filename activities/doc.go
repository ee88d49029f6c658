// Package activities holds Tollgate's LLM activities: a provider-neutral
// Request and Response, and Activities.Complete, which runs a Request through
// the official OpenAI (Chat Completions), Anthropic (Messages) or Gemini
// (google.golang.org/genai, the Gemini API's generateContent) Go SDK.
//
// The SDKs' own retries are off: Temporal and the Tollgate interceptor own
// retrying. Every HTTP response the SDKs receive, success or failure, has its
// status and headers recorded into the classify.Recorder carried by the
// activity's context (see classify.NewContext), so the interceptor learns the
// provider's limits from every call. SDK errors are returned as they are
// (wrapped with %w), so errors.As finds *openai.Error, *anthropic.Error and
// genai.APIError.
//
// A Request may stream (Request.Stream; an Anthropic call the SDK would
// refuse without streaming always does): the SDKs' streaming APIs are
// assembled into the same Response. Inside an activity, Complete heartbeats
// while a call runs (a Progress of the tokens so far) and cuts a stream
// silent for the activity's HeartbeatTimeout (*StallError); a stream that
// breaks off fails with a *StreamError carrying the usage so far.
//
// A Request is a quota.Governed input: QuotaCharge gives its key and an
// estimated cost from the provider's estimator (EstimateOpenAI,
// EstimateAnthropic, EstimateGemini). A Response is a quota.Metered result:
// QuotaUsage gives what the call actually used.
//
// API keys come only from Config, on the worker; they are never part of a
// Request (inputs are stored in workflow history) and never logged.
package activities
