package activities

import (
	"context"
	"net/http"

	"github.com/tollgate/tollgate/classify"
)

// recordingTransport records the status and headers of every response into
// the classify.Recorder of the request's context (if any), so the
// interceptor can read the provider's limits after the call, from successes
// as well as failures. It also records into the call's own recorder (see
// withCallRecorder), for an SDK that does not hand its HTTP response back.
type recordingTransport struct {
	next http.RoundTripper
}

// RoundTrip sends req and records the response.
func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp != nil {
		ctx := req.Context()
		classify.RecorderFrom(ctx).Record(resp.StatusCode, resp.Header)
		callRecorderFrom(ctx).Record(resp.StatusCode, resp.Header)
	}
	return resp, err
}

// callRecorderKey carries the Recorder of one call made by Complete itself,
// apart from the interceptor's.
type callRecorderKey struct{}

// withCallRecorder returns a copy of ctx whose calls' responses are also
// recorded into r.
func withCallRecorder(ctx context.Context, r *classify.Recorder) context.Context {
	return context.WithValue(ctx, callRecorderKey{}, r)
}

// callRecorderFrom returns the call's own Recorder, or nil (recording into
// which does nothing).
func callRecorderFrom(ctx context.Context) *classify.Recorder {
	r, _ := ctx.Value(callRecorderKey{}).(*classify.Recorder)
	return r
}

// lastResponse is the last response r recorded, as an *http.Response with
// only its status and headers, or nil when none was.
func lastResponse(r *classify.Recorder) *http.Response {
	status, h, ok := r.Last()
	if !ok {
		return nil
	}
	return &http.Response{StatusCode: status, Header: h}
}
