package llmsim

// InFlight is how many calls a Sim is answering at once: a call is in flight
// from the moment its request has been read until just before its answer (or
// error) is written, so a client that has its answer is no longer counted. A
// streamed call stays in flight until its last event is about to be sent; a
// call whose client went away leaves when its handler notices (a delay or a
// stream ends early when the connection closes).
type InFlight struct {
	// Now is the calls in flight at this moment.
	Now int64
	// Peak is the most calls in flight at once since the Sim started.
	Peak int64
}

// inFlight counts the calls in flight, by model and in total, guarded by the
// Sim's lock.
type inFlight struct {
	byModel map[string]*InFlight
	total   InFlight
}

func newInFlight() inFlight {
	return inFlight{byModel: make(map[string]*InFlight)}
}

func (f *InFlight) enter() {
	f.Now++
	f.Peak = max(f.Peak, f.Now)
}

// enter counts a call for model as in flight and returns the function that
// counts it out; that function may be called more than once and counts the
// call out only the first time.
func (s *Sim) enter(model string) (leave func()) {
	s.mu.Lock()
	m := s.inFlight.byModel[model]
	if m == nil {
		m = &InFlight{}
		s.inFlight.byModel[model] = m
	}
	m.enter()
	s.inFlight.total.enter()
	s.mu.Unlock()
	left := false
	return func() {
		if left {
			return
		}
		left = true
		s.mu.Lock()
		m.Now--
		s.inFlight.total.Now--
		s.mu.Unlock()
	}
}

// InFlight returns the calls in flight for model (by the name callers sent,
// known or not), or for every model together when model is "". A concurrency
// limit held by the callers shows as a Peak no higher than the limit. It is
// safe for concurrent use.
func (s *Sim) InFlight(model string) InFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	if model == "" {
		return s.inFlight.total
	}
	if m := s.inFlight.byModel[model]; m != nil {
		return *m
	}
	return InFlight{}
}
