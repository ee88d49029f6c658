// Package classify reads what an LLM provider answered (an HTTP status,
// headers and body, or the error an official SDK returned) and says what it
// means: a Verdict with a class, the Retry-After to honour and the limits the
// provider reported. Its functions are pure: no I/O and no Temporal.
package classify
