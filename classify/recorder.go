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
