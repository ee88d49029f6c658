package llmsim

import (
	"sort"
	"time"
)

// Stats counts what a Sim answered. Every call counts in Received and in
// exactly one of Accepted, TooManyRequests, Overloaded or Failed.
type Stats struct {
	// Received is every call routed to a provider endpoint.
	Received int64
	// Accepted is calls answered 200.
	Accepted int64
	// TooManyRequests is every 429 sent: bucket refusals, spend caps and
	// injected rate limits.
	TooManyRequests int64
	// SpendCapped is the part of TooManyRequests that were spend-cap errors.
	SpendCapped int64
	// Overloaded is 503 and 529 answers.
	Overloaded int64
	// Failed is every other error (400, 401, 404, 500, …).
	Failed int64
	// InputTokens and OutputTokens total the usage reported on accepted
	// calls.
	InputTokens  int64
	OutputTokens int64
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens
	// read from and written to the prompt cache (writes are counted for
	// Anthropic only, the one provider that reports them).
	CacheReadTokens  int64
	CacheWriteTokens int64
}

func (s *Stats) add(o Stats) {
	s.Received += o.Received
	s.Accepted += o.Accepted
	s.TooManyRequests += o.TooManyRequests
	s.SpendCapped += o.SpendCapped
	s.Overloaded += o.Overloaded
	s.Failed += o.Failed
	s.InputTokens += o.InputTokens
	s.OutputTokens += o.OutputTokens
	s.CacheReadTokens += o.CacheReadTokens
	s.CacheWriteTokens += o.CacheWriteTokens
}

// Second is one second of a Series: calls accepted and 429s sent in the second
// starting at Start (by the Sim's clock).
type Second struct {
	Start           time.Time
	Accepted        int64
	TooManyRequests int64
}

// stats is the Sim's bookkeeping, guarded by the Sim's lock.
type stats struct {
	byModel  map[string]*Stats
	bySecond map[string]map[int64]*Second // model → unix second → counts
}

func newStats() stats {
	return stats{byModel: make(map[string]*Stats), bySecond: make(map[string]map[int64]*Second)}
}

// record counts one answer for model at now.
func (st *stats) record(model string, now time.Time, status int, spendCap bool, a answer) {
	s := st.byModel[model]
	if s == nil {
		s = &Stats{}
		st.byModel[model] = s
	}
	s.Received++
	switch {
	case status == 200:
		s.Accepted++
		s.InputTokens += a.in
		s.OutputTokens += a.out
		s.CacheReadTokens += a.cacheRead
		s.CacheWriteTokens += a.cacheWrite
	case status == 429:
		s.TooManyRequests++
		if spendCap {
			s.SpendCapped++
		}
	case status == 503 || status == 529:
		s.Overloaded++
	default:
		s.Failed++
	}
	if status != 200 && status != 429 {
		return
	}
	secs := st.bySecond[model]
	if secs == nil {
		secs = make(map[int64]*Second)
		st.bySecond[model] = secs
	}
	u := now.Unix()
	sec := secs[u]
	if sec == nil {
		sec = &Second{Start: time.Unix(u, 0).UTC()}
		secs[u] = sec
	}
	if status == 200 {
		sec.Accepted++
	} else {
		sec.TooManyRequests++
	}
}

// Stats returns the counts for model, or for every model when model is "".
// Models are counted by the name callers sent, known or not.
func (s *Sim) Stats(model string) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out Stats
	for m, st := range s.stats.byModel {
		if model == "" || m == model {
			out.add(*st)
		}
	}
	return out
}

// Series returns, for model (or every model when ""), one Second per second
// from the first to the last second in which a call was accepted or refused
// with a 429, zeros included, in order. It is empty before any such call.
func (s *Sim) Series(model string) []Second {
	s.mu.Lock()
	defer s.mu.Unlock()
	merged := make(map[int64]*Second)
	for m, secs := range s.stats.bySecond {
		if model != "" && m != model {
			continue
		}
		for u, sec := range secs {
			t := merged[u]
			if t == nil {
				t = &Second{Start: sec.Start}
				merged[u] = t
			}
			t.Accepted += sec.Accepted
			t.TooManyRequests += sec.TooManyRequests
		}
	}
	if len(merged) == 0 {
		return nil
	}
	keys := make([]int64, 0, len(merged))
	for u := range merged {
		keys = append(keys, u)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	first, last := keys[0], keys[len(keys)-1]
	out := make([]Second, 0, last-first+1)
	for u := first; u <= last; u++ {
		if sec := merged[u]; sec != nil {
			out = append(out, *sec)
		} else {
			out = append(out, Second{Start: time.Unix(u, 0).UTC()})
		}
	}
	return out
}
