package classify

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// Error classifies what a call returned, so that an activity can hand over
// whatever the SDK gave it. now is when the call ended.
//
//   - nil is OK.
//   - *openai.Error (openai-go v3) and *anthropic.Error (anthropic-sdk-go v2),
//     found with errors.As anywhere in the chain, are classified like
//     Response from their StatusCode, Response.Header and raw JSON body. An
//     error event inside a stream (Anthropic's "event: error", which the SDK
//     returns as an *anthropic.Error of the stream's 200 answer, and
//     openai-go's *ssestream.StreamError, a data line holding {"error": …})
//     is classified by its body alone, like its HTTP twin: an
//     overloaded_error is Overloaded, an insufficient_quota a SpendCap. It
//     carries no Retry-After (its headers went out with the 200).
//   - genai.APIError (google.golang.org/genai, the Gemini SDK) is classified
//     from its Code and the google.rpc.Status it decoded (message, status,
//     details: the RetryInfo and QuotaFailure), having no headers.
//   - context.Canceled is Canceled; context.DeadlineExceeded, net timeouts,
//     connection resets and refusals, io.ErrUnexpectedEOF, io.EOF and other
//     *net.OpError and *net.DNSError failures are Transient, with a fixed
//     Reason (the error's own text may hold a URL with a key in it).
//   - Any other error whose text mentions a rate limit ("rate limit", "too
//     many requests", a standalone "429") is RateLimited, and one that says
//     "overloaded" is Overloaded: the least trusted signal.
//   - Anything else is Unknown, with an empty Reason.
//
// Error never panics, whatever it is given.
func (c Classifier) Error(err error, now time.Time) Verdict {
	if err == nil {
		return Verdict{Class: OK}
	}
	var oe *openai.Error
	if errors.As(err, &oe) && oe != nil {
		var body []byte
		if raw := strings.TrimSpace(oe.RawJSON()); raw != "" {
			// RawJSON is the inner error object; wrap it back.
			body = []byte(`{"error":` + raw + `}`)
		}
		return c.sdkVerdict(oe.StatusCode, oe.Response, body, now)
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) && ae != nil {
		return c.sdkVerdict(ae.StatusCode, ae.Response, []byte(ae.RawJSON()), now)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) && se != nil {
		return c.Response(0, nil, se.Event.Data, now)
	}
	if status, body, ok := geminiError(err); ok {
		// The SDK keeps no headers: Gemini's hints are all in the body.
		return c.sdkVerdict(status, nil, body, now)
	}
	if class, why, ok := transportClass(err); ok {
		return Verdict{Class: class, Retryable: class.Retryable(), Reason: why}
	}
	if class, why, ok := errorTextClass(err.Error()); ok {
		return Verdict{Class: class, Retryable: class.Retryable(), Reason: why}
	}
	return Verdict{Class: Unknown}
}

// sdkVerdict classifies an SDK's API error. A status outside 100–599 (an
// error decoded from a stream, say) is classified by its body.
func (c Classifier) sdkVerdict(status int, res *http.Response, body []byte, now time.Time) Verdict {
	var header http.Header
	if res != nil {
		header = res.Header
	}
	if status >= 200 && status < 300 {
		// An error event inside a successful stream: the body decides.
		status = 0
	}
	return c.Response(status, header, body, now)
}

// transportClass recognizes failures to get an answer at all.
func transportClass(err error) (Class, string, bool) {
	var ne net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled, "canceled", true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return Transient, "timeout", true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return Transient, "connection reset", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return Transient, "connection refused", true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return Transient, "connection closed early", true
	case errors.As(err, &dnsErr):
		return Transient, "name resolution failed", true
	case errors.As(err, &opErr):
		return Transient, "network error", true
	}
	return Unknown, "", false
}

// errorTextClass is the last resort: what an opaque error's text says.
func errorTextClass(text string) (Class, string, bool) {
	if len(text) > 4096 {
		text = text[:4096]
	}
	l := strings.ToLower(text)
	switch {
	case strings.Contains(l, "rate limit"), strings.Contains(l, "rate_limit"), strings.Contains(l, "ratelimit"),
		strings.Contains(l, "too many requests"), hasStandalone(l, "429"):
		return RateLimited, "error text mentions a rate limit", true
	case strings.Contains(l, "overloaded"):
		return Overloaded, "error text mentions overload", true
	}
	return Unknown, "", false
}

// hasStandalone reports whether s contains num with no digit on either side.
func hasStandalone(s, num string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], num)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(num)
		if (j == 0 || !isDigit(s[j-1])) && (end == len(s) || !isDigit(s[end])) {
			return true
		}
		i = j + 1
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
