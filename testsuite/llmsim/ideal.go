package llmsim

import "time"

// Charge is what a model's limiter kept of one call it admitted, per axis:
// the call's cost at admission less what was given back when it was
// answered (Anthropic's unused output tokens).
type Charge struct {
	Requests, Tokens, InputTokens, OutputTokens int64
}

func (c cost) less(r cost) cost {
	return cost{requests: c.requests - r.requests, tokens: c.tokens - r.tokens, input: c.input - r.input, output: c.output - r.output}
}

func (c Charge) cost() cost {
	return cost{requests: c.Requests, tokens: c.Tokens, input: c.InputTokens, output: c.OutputTokens}
}

// Charges returns what the limiter kept of every call admitted on model,
// in the order admitted, when Config.RecordCharges is set (nil otherwise).
func (s *Sim) Charges(model string) []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Charge(nil), s.charges[model]...)
}

// Ideal returns how many of calls, in order, and how many of their input
// tokens (InputTokens, or Tokens on a model without an input limit) one
// account of m admits within window from a full start, sent by a client
// that knows the limiter exactly: each call the moment it fits, the next
// the moment after. It is the most any client gets through m's limiter
// with these calls, whatever its own model of the provider: the
// denominator of a goodput that a window shape or a mix of call sizes
// cannot inflate. A call that can never fit is skipped. The daily window
// is ignored.
func Ideal(m Model, calls []Charge, window time.Duration) (admitted int, inputTokens int64) {
	m.RequestsPerDay = 0
	start := time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC) // a Monday: no boundary is special
	lim := newLimiter(m, start)
	end := start.Add(window)
	now := start
	for _, ch := range calls {
		for {
			if !now.Before(end) {
				return admitted, inputTokens
			}
			r := lim.admit(ch.cost(), now)
			if r == nil {
				admitted++
				inputTokens += ch.InputTokens
				if m.InputTokensPerMinute <= 0 {
					inputTokens += ch.Tokens - ch.InputTokens
				}
				break
			}
			if r.never || r.wait <= 0 {
				break
			}
			now = now.Add(r.wait)
		}
	}
	return admitted, inputTokens
}
