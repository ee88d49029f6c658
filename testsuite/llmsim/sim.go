package llmsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxBody bounds a request body; larger ones get a 413.
const maxBody = 16 << 20

// Clock tells a Sim the time. Buckets, reset headers and the per-second series
// all read it, so a test with a fake clock controls them exactly.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told. The zero value reads the
// zero time; it is safe for concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a ManualClock reading t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Option configures a Sim beyond its Config.
type Option func(*Sim)

// WithClock makes the Sim read time from c instead of the system clock.
func WithClock(c Clock) Option {
	return func(s *Sim) {
		if c != nil {
			s.clock = c
		}
	}
}

// Sim is a simulated provider: an http.Handler serving the three wire
// formats.
// Build it with New. It is safe for concurrent use.
type Sim struct {
	cfg   Config
	clock Clock

	mu       sync.Mutex
	models   map[string]Model // provider + "/" + name
	accounts map[string]Account
	limiters map[string]*limiter    // account + "/" + provider + "/" + model
	caches   map[string]promptCache // as limiters
	spent    map[string]int64       // tokens used, by account
	rules    []*rule
	rng      *rand.Rand
	seq      uint64
	stats    stats
	inFlight inFlight
	charges  map[string][]Charge // by model name, with Config.RecordCharges
}

var _ http.Handler = (*Sim)(nil)

// New validates cfg and returns a Sim serving it. Its buckets start full.
// It returns a *ConfigError naming the first bad field.
func New(cfg Config, opts ...Option) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:      cfg,
		clock:    systemClock{},
		models:   make(map[string]Model, len(cfg.Models)),
		accounts: make(map[string]Account, len(cfg.Accounts)),
		limiters: make(map[string]*limiter),
		caches:   make(map[string]promptCache),
		spent:    make(map[string]int64),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		stats:    newStats(),
		inFlight: newInFlight(),
	}
	for _, opt := range opts {
		opt(s)
	}
	for _, m := range cfg.Models {
		s.models[m.Provider+"/"+m.Name] = m
	}
	for _, a := range cfg.Accounts {
		s.accounts[a.APIKey] = a
	}
	for _, f := range cfg.Faults {
		s.rules = append(s.rules, &rule{Fault: f})
	}
	return s, nil
}

// Handler returns s as an http.Handler (for httptest.NewServer).
func (s *Sim) Handler() http.Handler { return s }

// Inject adds fault rules after those already present. It returns a
// *ConfigError (field "faults[i]") for a bad rule and then adds none.
func (s *Sim) Inject(faults ...Fault) error {
	for i, f := range faults {
		if err := f.validate(fmt.Sprintf("faults[%d]", i)); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range faults {
		s.rules = append(s.rules, &rule{Fault: f})
	}
	return nil
}

// ClearFaults removes every fault rule, spent or not.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	s.rules = nil
	s.mu.Unlock()
}

// Spent returns the tokens (input plus output) the named account has used.
func (s *Sim) Spent(account string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spent[account]
}

// CapSpend sets the named account's spend cap to what it has spent so
// far (at least one token), so that every later call on it gets the
// spend-cap error: an account running out of credit mid-run. It reports
// whether Config.Accounts names the account.
func (s *Sim) CapSpend(account string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, a := range s.accounts {
		if a.Name == account {
			a.SpendCapTokens = max(s.spent[account], 1)
			s.accounts[key] = a
			return true
		}
	}
	return false
}

// ServeHTTP answers POST /v1/chat/completions (OpenAI), POST /v1/messages
// (Anthropic) and POST /v1beta/models/{model}:generateContent (Gemini); any
// other path gets a 404.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var d dialect
	switch r.URL.Path {
	case "/v1/chat/completions":
		d = openAIDialect{}
	case "/v1/messages":
		d = anthropicDialect{}
	default:
		g, ok := geminiRoute(r.URL.Path)
		if !ok {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		d = g
	}
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	var c call
	var perr *apiError
	switch {
	case r.Method != http.MethodPost:
		perr = &apiError{kind: kindInvalid, status: http.StatusMethodNotAllowed, detail: "use POST"}
	case readErr != nil:
		perr = &apiError{kind: kindInvalid, detail: "could not read the request body"}
	case len(body) > maxBody:
		perr = &apiError{kind: kindInvalid, status: http.StatusRequestEntityTooLarge, detail: "request body too large"}
	default:
		c, perr = d.parse(body)
	}
	leave := s.enter(c.model)
	defer leave()

	o := s.decide(d, d.apiKey(r), c, perr)
	for k, v := range o.header {
		w.Header()[k] = v
	}
	if o.err != nil {
		if o.err.retryAfter > 0 {
			w.Header().Set("retry-after", strconv.FormatInt(ceilSeconds(o.err.retryAfter), 10))
			if o.err.retryAfterMs {
				w.Header().Set("retry-after-ms", strconv.FormatInt(ceilMillis(o.err.retryAfter).Milliseconds(), 10))
			}
		}
		leave()
		d.writeError(w, o.err, o.requestID)
		return
	}
	if c.stream {
		if sd, ok := d.(streamDialect); ok {
			s.writeStream(w, r, sd, c, o, leave)
			return
		}
	}
	if o.delay > 0 {
		t := time.NewTimer(o.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	leave()
	d.writeAnswer(w, c, o.answer, o.requestID, o.now)
}

// outcome is what decide chose for one call.
type outcome struct {
	requestID string
	now       time.Time
	header    http.Header
	err       *apiError
	answer    answer
	delay     time.Duration
	// streamFault, when set, strikes the call's stream part-way.
	streamFault *Fault
}

// decide runs one call through auth, lookup, faults, spend cap, context
// window, overload and buckets, under the lock, and counts it.
func (s *Sim) decide(d dialect, key string, c call, perr *apiError) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	o := outcome{
		requestID: fmt.Sprintf("req_llmsim%012d", s.seq),
		now:       s.clock.Now(),
		header:    make(http.Header),
	}
	if h := d.requestIDHeader(); h != "" {
		o.header.Set(h, o.requestID)
	}
	o.err = s.check(d, key, c, perr, &o)
	status, spendCap := http.StatusOK, false
	if o.err != nil {
		status = o.err.httpStatus(d.overloadStatus())
		spendCap = o.err.kind == kindSpendCap
	}
	s.stats.record(c.model, o.now, status, spendCap, o.answer)
	return o
}

func (s *Sim) check(d dialect, key string, c call, perr *apiError, o *outcome) *apiError {
	acct, ok := s.account(key)
	if !ok {
		return &apiError{kind: kindUnauthorized, missingKey: key == ""}
	}
	if perr != nil {
		return perr
	}
	m, ok := s.models[d.provider()+"/"+c.model]
	if !ok {
		return &apiError{kind: kindNotFound, model: c.model}
	}
	c.spec, c.input = m, m.tokens(c.chars)
	lim := s.limiter(acct.Name, m, o.now)
	lim.refill(o.now)
	pc := s.promptCache(acct.Name, m)
	pc.read(&c, o.now)
	defer d.limitHeaders(o.header, lim, o.now)

	for _, r := range s.rules {
		if r.fire(d.provider(), c.model, c.stream) {
			if r.midStream() {
				// The call is answered; the rule strikes its stream.
				f := r.Fault
				o.streamFault = &f
				break
			}
			e := r.apiError(c.model)
			e.faultRPM = m.RequestsPerMinute
			return e
		}
	}
	if acct.SpendCapTokens > 0 && s.spent[acct.Name] >= acct.SpendCapTokens {
		return &apiError{kind: kindSpendCap, model: c.model}
	}
	if m.ContextWindow > 0 && c.input+c.maxTokens > m.ContextWindow {
		return &apiError{kind: kindContextLength, model: c.model, window: m.ContextWindow, input: c.input, maxTokens: c.maxTokens}
	}
	if p := s.cfg.Overload.Probability; p > 0 && s.rng.Float64() < p {
		return &apiError{kind: kindOverload, model: c.model, status: s.cfg.Overload.Status, retryAfter: s.cfg.Overload.RetryAfter}
	}
	if ref := lim.admit(d.cost(c), o.now); ref != nil {
		e := &apiError{kind: kindRateLimit, model: c.model, refusal: ref}
		if !ref.never {
			e.retryAfter = ref.wait
			e.retryAfterMs = m.Period > 0 && m.Period < time.Minute
		}
		return e
	}
	o.answer = compose(c, o.requestID)
	pc.write(c, o.now)
	kept := d.cost(c)
	if a, ok := d.(adjuster); ok {
		back := a.adjust(c, o.answer)
		lim.refund(back)
		kept = kept.less(back)
	}
	if s.cfg.RecordCharges {
		if s.charges == nil {
			s.charges = make(map[string][]Charge)
		}
		s.charges[c.model] = append(s.charges[c.model], Charge{Requests: kept.requests, Tokens: kept.tokens, InputTokens: kept.input, OutputTokens: kept.output})
	}
	s.spent[acct.Name] += o.answer.in + o.answer.out
	o.delay = s.cfg.Latency.delay(s.rng)
	return nil
}

// account returns the account key authenticates, if any.
func (s *Sim) account(key string) (Account, bool) {
	if key == "" {
		return Account{}, false
	}
	if len(s.accounts) == 0 {
		return Account{Name: "default"}, true
	}
	a, ok := s.accounts[key]
	return a, ok
}

func (s *Sim) limiter(account string, m Model, now time.Time) *limiter {
	k := account + "/" + m.Provider + "/" + m.Name
	l := s.limiters[k]
	if l == nil {
		l = newLimiter(m, now)
		s.limiters[k] = l
	}
	return l
}

// promptCache is the account's prompt cache on model m.
func (s *Sim) promptCache(account string, m Model) promptCache {
	k := account + "/" + m.Provider + "/" + m.Name
	pc := s.caches[k]
	if pc == nil {
		pc = make(promptCache)
		s.caches[k] = pc
	}
	return pc
}

// ceilSeconds is d in whole seconds, rounded up: how retry-after is sent.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// Serve answers calls on l until ctx is done, then shuts down gracefully.
func (s *Sim) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		case <-done:
		}
	}()
	err := srv.Serve(l)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ListenAndServe listens on addr (e.g. "127.0.0.1:8089") and serves until ctx
// is done. OpenAI clients use base URL http://addr/v1/, Anthropic and Gemini
// clients http://addr.
func (s *Sim) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("llmsim: listen: %w", err)
	}
	return s.Serve(ctx, l)
}
