package activities

import (
	"net/http"

	"github.com/tollgate/tollgate/classify"
)

// recordingTransport records the status and headers of every response into
// the classify.Recorder of the request's context (if any), so the
// interceptor can read the provider's limits after the call, from successes
// as well as failures.
type recordingTransport struct {
	next http.RoundTripper
}

// RoundTrip sends req and records the response.
func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err == nil && resp != nil {
		classify.RecorderFrom(req.Context()).Record(resp.StatusCode, resp.Header)
	}
	return resp, err
}
