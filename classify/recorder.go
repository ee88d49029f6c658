package classify

import (
	"context"
	"net/http"
	"sync"
)

// Recorder keeps the status and headers of the HTTP responses one call
// received, so that whoever runs the call (the interceptor) can read the
// provider's limits after it, from successes as well as failures. An
// activity's HTTP transport finds it with RecorderFrom and calls Record. The
// zero Recorder is ready to use; it is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	status int
	header http.Header
	count  int
}

type recorderKey struct{}

// NewContext returns a copy of ctx that carries r.
func NewContext(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// RecorderFrom returns the Recorder ctx carries, or nil. Recording into a
// nil *Recorder does nothing, so callers need not check.
func RecorderFrom(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// Record notes one response's status and headers; the last one wins. The
// header is cloned, so the caller may reuse it.
func (r *Recorder) Record(status int, header http.Header) {
	if r == nil {
		return
	}
	h := header.Clone()
	r.mu.Lock()
	r.status, r.header = status, h
	r.count++
	r.mu.Unlock()
}

// Last returns the last response recorded; ok is false when none was.
func (r *Recorder) Last() (status int, header http.Header, ok bool) {
	if r == nil {
		return 0, nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status, r.header, r.count > 0
}

// Count returns how many responses were recorded.
func (r *Recorder) Count() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Transport is an http.RoundTripper that records every response's status
// and headers into the Recorder of its request's context (RecorderFrom),
// then hands the response on unchanged. Give it to the HTTP client of your
// own activity's SDK, e.g.
//
//	client := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: classify.Transport{}}))
//
// and call the SDK with the activity's context: Tollgate's interceptor
// then learns the provider's limits from the answers' rate-limit headers,
// and classifies a 429, an overload or a spend cap with its Retry-After,
// exactly as for the shipped activities (it reads an SDK's error itself:
// *openai.Error, *anthropic.Error and the Gemini SDK's APIError). Outside
// a governed activity it records nothing. Next is the transport that sends
// the request; nil means http.DefaultTransport. It is safe for concurrent
// use when Next is.
type Transport struct {
	Next http.RoundTripper
}

// RoundTrip sends req through Next and records the response.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err == nil && resp != nil {
		RecorderFrom(req.Context()).Record(resp.StatusCode, resp.Header)
	}
	return resp, err
}
