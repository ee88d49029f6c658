// Package classify reads what an LLM provider answered (an HTTP status,
// headers and body, or the error an official SDK returned) and says what it
// means: a Verdict with a class, the Retry-After to honour, the limits the
// provider reported and, for a rate limit, the axis its body names. Its
// functions are pure: no I/O and no Temporal.
//
// Response classifies an HTTP answer, Error whatever a call returned
// (*openai.Error, *anthropic.Error, context and network errors), and Limits
// reads the rate-limit headers alone. A Classifier's zero value is ready to
// use; its MaxRetryAfter caps the hints it passes on.
//
// The class is decided from the most trusted signal present: a specific
// error code or type in the JSON body, then the body's message, then the
// HTTP status. Spend caps (Anthropic enforced_spend_limit_reached, OpenAI
// insufficient_quota and its spend and usage-limit codes) and Gemini's
// per-day quotas are terminal classes carrying the time the key reopens.
// A rate limit's axis is read from the body: OpenAI's error.type and its
// "per min" or "per day" unit, Anthropic's "input tokens per minute" and
// kindred wordings, Gemini's QuotaFailure metric and quota id.
//
// Time is always passed in (now), so the same answer always gives the same
// Verdict.
//
// The Recorder carries the status and headers an activity's HTTP transport
// saw to whoever runs the call, so the limits of successful responses can be
// read too.
package classify
