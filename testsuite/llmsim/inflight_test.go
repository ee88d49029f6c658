package llmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestInFlightCountsCallsBeingAnswered(t *testing.T) {
	f := newFixture(t, Config{
		Models: []Model{
			{Provider: Anthropic, Name: "a", RequestsPerMinute: 5},
			{Provider: Anthropic, Name: "b"},
		},
		Latency: Latency{Fixed: 300 * time.Millisecond},
	})
	require.Equal(t, InFlight{}, f.sim.InFlight("a"), "nothing before the first call")

	// Three calls to a and one to b at once: they overlap for the latency.
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, model := range []string{"a", "a", "a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			errs <- f.send(context.Background(), "/v1/messages", anthropicBody(model, "hello", 10))
		}()
	}
	close(release)
	require.Eventually(t, func() bool { return f.sim.InFlight("").Now == 4 }, 5*time.Second, time.Millisecond,
		"all four calls are held during their latency")
	require.EqualValues(t, 3, f.sim.InFlight("a").Now)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, InFlight{Now: 0, Peak: 3}, f.sim.InFlight("a"))
	require.Equal(t, InFlight{Now: 0, Peak: 1}, f.sim.InFlight("b"))
	require.Equal(t, InFlight{Now: 0, Peak: 4}, f.sim.InFlight(""), "the total's peak is the peak of the sum")

	t.Run("a caller holding its answer is not counted", func(t *testing.T) {
		for range 3 { // a's fourth and fifth calls fit its 5 requests, the sixth is refused
			f.anthropic(t, "k", "a", "hello", 10)
			require.Zero(t, f.sim.InFlight("a").Now)
		}
		require.EqualValues(t, 1, f.sim.Stats("a").TooManyRequests, "refused calls are counted in and out too")
		require.EqualValues(t, 3, f.sim.InFlight("a").Peak)
	})

	t.Run("unknown models by the name sent", func(t *testing.T) {
		f.anthropic(t, "k", "nope", "hello", 10)
		require.Equal(t, InFlight{Now: 0, Peak: 1}, f.sim.InFlight("nope"))
	})
}

func TestInFlightEndsWhenTheCallerGoesAway(t *testing.T) {
	f := newFixture(t, Config{
		Models:  []Model{{Provider: Anthropic, Name: "a"}},
		Latency: Latency{Fixed: time.Hour},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.send(ctx, "/v1/messages", anthropicBody("a", "hello", 10)) }()
	require.Eventually(t, func() bool { return f.sim.InFlight("a").Now == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.Error(t, <-done)
	require.Eventually(t, func() bool { return f.sim.InFlight("a").Now == 0 }, 10*time.Second, time.Millisecond,
		"a call whose connection closed stops being held, though its latency has not passed")
	require.EqualValues(t, 1, f.sim.InFlight("a").Peak)
}

func TestInFlightHoldsAStreamUntilItsLastEvent(t *testing.T) {
	f := newFixture(t, Config{Models: streamModels, Latency: Latency{Fixed: time.Second}})
	// The latency delays the stream after its head, so the call is seen in
	// flight while its head has been read.
	body := anthropicBody("claude-sonnet-4-5", strings.Repeat("plan a trip ", 20), 200)
	body["stream"] = true
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/messages", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("x-api-key", "k")
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, InFlight{Now: 1, Peak: 1}, f.sim.InFlight("claude-sonnet-4-5"), "held while it streams")
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(raw), "event: message_stop")
	require.Equal(t, InFlight{Now: 0, Peak: 1}, f.sim.InFlight("claude-sonnet-4-5"), "counted out before the last event")
}

// send posts body to path with a key and reads the answer, whatever its
// status; it returns transport errors only, so goroutines may call it.
func (f *fixture) send(ctx context.Context, path string, body map[string]any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-api-key", "k")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}
