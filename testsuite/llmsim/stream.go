package llmsim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Streaming. A call with stream: true is decided like any other (auth,
// faults, spend cap, overload, buckets; an error is an ordinary HTTP error
// answer), and an accepted one is answered with server-sent events in the
// provider's own format:
//
//   - OpenAI: "data:" lines of chat.completion.chunk objects (a role chunk,
//     one chunk per text delta, a chunk with finish_reason), a last chunk
//     with empty choices and the usage when stream_options.include_usage is
//     true (every other chunk then carries "usage": null), and "data: [DONE]".
//   - Anthropic: message_start (input tokens), content_block_start, ping,
//     one content_block_delta per text delta, content_block_stop,
//     message_delta (stop_reason and the final output tokens), message_stop.
//
// The answer and its usage are the non-streamed ones, cut into deltas of
// chunkRunes characters (a tool call's arguments, for a tool call: OpenAI
// delta.tool_calls with the id and name first, Anthropic a tool_use block
// and input_json_delta events). Config.Latency delays the first delta (the time to
// first token), after the opening events. Mid-stream faults (FaultStall,
// FaultDisconnect, and any kind with Fault.MidStream) strike after
// Fault.AfterChunks deltas. A stream cut short is charged and counted as
// the whole answer: the provider counted it when it accepted the call.

// The stream-only faults.
const (
	// FaultStall holds a streamed answer silent for Fault.Stall after
	// Fault.AfterChunks text deltas, then finishes it: a stalled connection.
	// The stall ends early if the caller goes away.
	FaultStall FaultKind = "stall"
	// FaultDisconnect drops the connection after Fault.AfterChunks text
	// deltas, without the stream's closing events: a connection lost in the
	// middle of an answer.
	FaultDisconnect FaultKind = "disconnect"
)

// chunkRunes is how many characters of the answer one text delta carries:
// about four tokens, as the providers send a few tokens per delta.
const chunkRunes = 16

// midStream reports whether the fault strikes a stream part-way rather
// than refusing the call.
func (f Fault) midStream() bool {
	return f.MidStream || f.Kind == FaultStall || f.Kind == FaultDisconnect
}

// validateStream checks the fields of the mid-stream faults.
func (f Fault) validateStream(field string) error {
	switch {
	case f.AfterChunks < 0:
		return configErr(field+".after_chunks", strconv.Itoa(f.AfterChunks), "is negative",
			"use 0 to strike right after the stream opens, or a count of text deltas to let through")
	case f.AfterChunks > 0 && !f.midStream():
		return configErr(field+".after_chunks", strconv.Itoa(f.AfterChunks), "is set on a fault that refuses the call outright",
			"set mid_stream: true to strike the stream part-way, or remove after_chunks")
	case f.Kind == FaultStall && f.Stall <= 0:
		return configErr(field+".stall", f.Stall.String(), "is not positive for kind stall",
			"set how long the stream stays silent, e.g. 30s")
	case f.Kind != FaultStall && f.Stall != 0:
		return configErr(field+".stall", f.Stall.String(), "is set for kind "+string(f.Kind),
			"only a stall holds a stream silent: use kind stall, or remove stall")
	case f.midStream() && f.RetryAfter != 0:
		return configErr(field+".retry_after", f.RetryAfter.String(), "is set on a mid-stream fault",
			"a stream's headers went out with its 200, so no retry-after can follow: leave it 0")
	case f.midStream() && f.Status != 0:
		return configErr(field+".status", strconv.Itoa(f.Status), "is set on a mid-stream fault",
			"an error inside a stream has no status of its own (the stream's is 200): leave it 0")
	}
	return nil
}

// event is one server-sent event: its name (empty for OpenAI, which names
// none) and its data.
type event struct {
	name string
	data []byte
}

// streamed is the accepted call a stream answers.
type streamed struct {
	call      call
	answer    answer
	requestID string
	now       time.Time
}

// streamDialect is a dialect that answers stream: true: opening events, one
// event per text delta, closing events, and its error event.
type streamDialect interface {
	dialect
	streamHead(st streamed) []event
	streamDelta(st streamed, text string) event
	streamTail(st streamed) []event
	// streamError renders e as the error event the provider sends inside a
	// stream.
	streamError(e *apiError, requestID string) event
}

var (
	_ streamDialect = openAIDialect{}
	_ streamDialect = anthropicDialect{}
)

// writeStream answers an accepted streamed call, applying its mid-stream
// fault, if any. It returns early when the caller goes away. leave counts the
// call out of InFlight just before its last event is sent.
func (s *Sim) writeStream(w http.ResponseWriter, r *http.Request, d streamDialect, c call, o outcome, leave func()) {
	st := streamed{call: c, answer: o.answer, requestID: o.requestID, now: o.now}
	w.Header().Set("content-type", "text/event-stream; charset=utf-8")
	w.Header().Set("cache-control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(evs ...event) bool {
		for _, ev := range evs {
			var b strings.Builder
			if ev.name != "" {
				b.WriteString("event: " + ev.name + "\n")
			}
			b.WriteString("data: ")
			b.Write(ev.data)
			b.WriteString("\n\n")
			if _, err := w.Write([]byte(b.String())); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	ctx := r.Context()
	if !send(d.streamHead(st)...) || !pause(ctx, o.delay) {
		return
	}
	pieces := split(o.answer.streamText(), chunkRunes)
	f := o.streamFault
	for i := 0; ; i++ {
		if f != nil && i == min(f.AfterChunks, len(pieces)) {
			switch f.Kind {
			case FaultStall:
				if !pause(ctx, f.Stall) {
					return
				}
			case FaultDisconnect:
				// The server closes the connection without the chunked
				// body's end: the client reads an unexpected EOF.
				panic(http.ErrAbortHandler)
			default:
				leave()
				send(d.streamError(f.apiError(c.model), o.requestID))
				return
			}
		}
		if i == len(pieces) {
			break
		}
		if !send(d.streamDelta(st, pieces[i])) {
			return
		}
	}
	leave()
	send(d.streamTail(st)...)
}

// pause waits for d, or until ctx is done; false if ctx ended it.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// split cuts text into pieces of at most n characters, on rune boundaries.
func split(text string, n int) []string {
	var pieces []string
	runes := []rune(text)
	for len(runes) > 0 {
		k := min(n, len(runes))
		pieces = append(pieces, string(runes[:k]))
		runes = runes[k:]
	}
	return pieces
}

// jsonEvent is an event whose data is v as JSON.
func jsonEvent(name string, v any) event {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings, numbers and nil are marshalled here.
		panic("llmsim: marshal stream event: " + err.Error())
	}
	return event{name: name, data: b}
}

// errorEvent renders e through write (a dialect's writeError) and returns
// the body it wrote: the error object a stream carries is the HTTP one.
func errorEvent(name string, e *apiError, requestID string, write func(http.ResponseWriter, *apiError, string)) event {
	var body bodyRecorder
	write(&body, e, requestID)
	return event{name: name, data: []byte(strings.TrimSpace(body.b.String()))}
}

// bodyRecorder is an http.ResponseWriter that keeps only the body.
type bodyRecorder struct {
	h http.Header
	b strings.Builder
}

func (r *bodyRecorder) Header() http.Header {
	if r.h == nil {
		r.h = make(http.Header)
	}
	return r.h
}

func (r *bodyRecorder) Write(p []byte) (int, error) { return r.b.Write(p) }

func (r *bodyRecorder) WriteHeader(int) {}

// OpenAI: chat.completion.chunk objects, then [DONE].

func (openAIDialect) chunk(st streamed, choices []any, usage map[string]any) map[string]any {
	m := map[string]any{
		"id":                 "chatcmpl-" + strings.TrimPrefix(st.answer.id, "req_"),
		"object":             "chat.completion.chunk",
		"created":            st.now.Unix(),
		"model":              st.call.model,
		"service_tier":       "default",
		"system_fingerprint": "fp_llmsim",
		"choices":            choices,
	}
	if st.call.includeUsage {
		m["usage"] = nil
		if usage != nil {
			m["usage"] = usage
		}
	}
	return m
}

func openAIChoice(delta map[string]any, finish any) []any {
	return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
}

func (d openAIDialect) streamHead(st streamed) []event {
	delta := map[string]any{"role": "assistant", "content": "", "refusal": nil}
	if t := st.answer.tool; t != nil {
		delta["content"] = nil
		delta["tool_calls"] = []any{map[string]any{"index": 0, "id": "call_" + t.id, "type": "function",
			"function": map[string]any{"name": t.name, "arguments": ""}}}
	}
	return []event{jsonEvent("", d.chunk(st, openAIChoice(delta, nil), nil))}
}

func (d openAIDialect) streamDelta(st streamed, text string) event {
	if st.answer.tool != nil {
		return jsonEvent("", d.chunk(st, openAIChoice(map[string]any{"tool_calls": []any{
			map[string]any{"index": 0, "function": map[string]any{"arguments": text}}}}, nil), nil))
	}
	return jsonEvent("", d.chunk(st, openAIChoice(map[string]any{"content": text}, nil), nil))
}

func (d openAIDialect) streamTail(st streamed) []event {
	evs := []event{jsonEvent("", d.chunk(st, openAIChoice(map[string]any{}, openAIFinishReason(st.answer)), nil))}
	if st.call.includeUsage {
		evs = append(evs, jsonEvent("", d.chunk(st, []any{}, openAIUsage(st.answer))))
	}
	return append(evs, event{data: []byte("[DONE]")})
}

// streamError is a data line holding {"error": {…}}, the object an error
// answer's body holds.
func (d openAIDialect) streamError(e *apiError, requestID string) event {
	return errorEvent("", e, requestID, d.writeError)
}

// Anthropic: named events from message_start to message_stop.

func (anthropicDialect) streamHead(st streamed) []event {
	block := map[string]any{"type": "text", "text": ""}
	if t := st.answer.tool; t != nil {
		block = map[string]any{"type": "tool_use", "id": "toolu_" + t.id, "name": t.name, "input": map[string]any{}}
	}
	usage := anthropicUsage(st.answer)
	usage["output_tokens"] = 1 // what message_start reports before any output
	return []event{
		jsonEvent("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id":            anthropicMessageID(st.answer),
			"type":          "message",
			"role":          "assistant",
			"model":         st.call.model,
			"content":       []any{},
			"stop_reason":   nil,
			"stop_sequence": nil,
			"usage":         usage,
		}}),
		jsonEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": block}),
		jsonEvent("ping", map[string]any{"type": "ping"}),
	}
}

func (anthropicDialect) streamDelta(st streamed, text string) event {
	if st.answer.tool != nil {
		return jsonEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": text}})
	}
	return jsonEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": text}})
}

func (anthropicDialect) streamTail(st streamed) []event {
	return []event{
		jsonEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
		jsonEvent("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": anthropicStopReason(st.answer), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": st.answer.out}}),
		jsonEvent("message_stop", map[string]any{"type": "message_stop"}),
	}
}

// streamError is "event: error" holding the error answer's body.
func (d anthropicDialect) streamError(e *apiError, requestID string) event {
	return errorEvent("error", e, requestID, d.writeError)
}
