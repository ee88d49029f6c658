package redis

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/storekit"
)

// Client is the part of a go-redis client the Store uses: running scripts.
// *goredis.Client, *goredis.ClusterClient and *goredis.Ring implement it.
type Client interface {
	goredis.Scripter
}

// DefaultPrefix starts every Redis key the Store writes unless
// Options.Prefix says otherwise.
const DefaultPrefix = "tollgate"

// Options configure a Store. The zero Options are the production settings.
type Options struct {
	// Prefix starts every Redis key, followed by ":{<quota key>}". Stores
	// that share budgets must share the prefix. Default DefaultPrefix. It
	// may not contain '{', '}' or spaces.
	Prefix string
	// Clock, when set, replaces Redis TIME as the scripts' clock. For tests
	// only: in production every replica must read the one clock Redis
	// keeps, so leave it nil.
	Clock quota.Clock
	// StartDelay is how long after Redis decides a grant on a key with a
	// rate limit its call starts, at the least: a grant's Start is the
	// start gate's wait plus StartDelay, less what its reply took to
	// arrive beyond the fastest reply lately. So a reply that comes up to
	// StartDelay late still starts its call when the gate meant, and two
	// calls the gate spaces 100 ms apart reach the provider 100 ms apart
	// whichever of their replies was held up on the way; a provider that
	// enforces its limit over a second or less refuses a call that
	// arrives a millisecond too close to the one before. It adds
	// StartDelay to every such call's latency and costs no throughput,
	// since every call moves alike. Zero means DefaultStartDelay; a
	// negative StartDelay starts each call as soon as its reply arrives
	// (the gate's wait less the reply's lateness). At most time.Second.
	StartDelay time.Duration
}

// DefaultStartDelay is Options.StartDelay's default: about the slowest
// reply beyond the fastest measured in bench/fleet (3–6 ms on a loaded
// two-core host running the whole fleet), and nothing next to an LLM
// call's seconds.
const DefaultStartDelay = 5 * time.Millisecond

// Store is a quota.Store in Redis, shared by every process whose Store uses
// the same server and Prefix. Build it with New; it is safe for concurrent
// use and holds no state of its own beyond precomputed arguments and, per
// key, what it last saw of the key's state, to recover it from should
// Redis lose it (see the package doc).
type Store struct {
	rdb   Client
	clock quota.Clock
	ps    quota.Policies
	keys  map[quota.Key]*keyState
	// weights holds the script's weight argument of every tenant weighed
	// other than 1 (a policy's Weight, an account's TenantWeights),
	// formatted once.
	weights map[quota.Key]any
	// granted proves this store's grants after a loss (see views.go).
	granted grants
	// writable is set once the server refused the snapshot read-only.
	writable atomic.Bool
	// startDelay is Options.StartDelay, its default applied.
	startDelay time.Duration
	// delay measures how late replies arrive, on Redis TIME (no clock).
	delay replyDelay
}

var _ quota.Store = (*Store)(nil)

// New returns a Store over rdb for the keys of ps. It does not contact
// Redis: an unreachable server shows up as quota.ErrUnavailable on the first
// call. It returns an *quota.InvalidError for a nil client or a bad prefix.
func New(rdb Client, ps quota.Policies, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, &quota.InvalidError{Field: "redis.client", Value: "nil", Problem: "is missing",
			Fix: "pass a client such as goredis.NewClient(opts)"}
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if i := strings.IndexAny(prefix, "{} \t\r\n"); i >= 0 {
		return nil, &quota.InvalidError{Field: "redis.prefix", Value: prefix,
			Problem: "contains " + strconv.QuoteRune(rune(prefix[i])),
			Fix:     `use letters, digits and punctuation other than braces, e.g. "tollgate"`}
	}
	if opts.StartDelay > time.Second {
		return nil, &quota.InvalidError{Field: "redis.start_delay", Value: opts.StartDelay.String(), Problem: "is over 1s",
			Fix: "leave it zero for the default (" + DefaultStartDelay.String() + "), or set a few milliseconds: it is added to every rate-limited call's latency"}
	}
	s := &Store{rdb: rdb, clock: opts.Clock, ps: ps, keys: make(map[quota.Key]*keyState), weights: make(map[quota.Key]any),
		startDelay: max(0, cmp.Or(opts.StartDelay, DefaultStartDelay))}
	name := epochName()
	views := make(map[string]*view)
	viewOf := func(state string, dailies int) *view {
		v, ok := views[state]
		if !ok {
			v = newView(dailies)
			views[state] = v
		}
		return v
	}
	for _, k := range ps.Keys() {
		_, p, _ := ps.Lookup(k)
		_, ap, nested := ps.Account(k)
		s.keys[k] = newKeyState(prefix, k, p, ap, nested, name, viewOf)
		weighed := []quota.Key{k}
		for tenant := range p.TenantWeights {
			t := k
			t.Tenant = tenant
			weighed = append(weighed, t)
		}
		for _, t := range weighed {
			if w := ps.Weight(t); t.Tenant != "" && w != 1 {
				s.weights[t] = strconv.FormatFloat(w, 'g', -1, 64)
			}
		}
	}
	return s, nil
}

// weight is the script's weight argument for a call on k: 1 unless k's
// tenant is weighed otherwise (quota.Policies.Weight).
func (s *Store) weight(k quota.Key) any {
	if w, ok := s.weights[k]; ok {
		return w
	}
	return "1"
}

// Reserve implements quota.Store: one script run decides and charges.
func (s *Store) Reserve(ctx context.Context, r quota.Reservation) (quota.Decision, error) {
	if err := r.Validate(); err != nil {
		return quota.Decision{}, err
	}
	ks, err := s.lookup(r.Key)
	if err != nil {
		return quota.Decision{}, err
	}
	spend, err := ks.spend(r.Cost)
	if err != nil {
		return quota.Decision{}, err
	}
	nowArg, local := s.now()
	var low, place any = "0", "0" // constants box without allocating
	if r.Priority == quota.Low {
		low = "1"
	}
	if r.Place {
		place = "1"
	}
	args := append(ks.args(nowArg, r.Key.Tenant, s.weight(r.Key), local, 12), r.Ticket, low,
		r.Cost.Requests, r.Cost.Tokens, r.Cost.InputTokens, r.Cost.OutputTokens, spend,
		ks.prompt(r.Prompt), ks.calib[0], ks.calib[1], ks.calib[2],
		ks.ttl(r.LeaseTTL), place)
	res, err := reserveScript.Run(ctx, s.rdb, ks.keys(r.Ticket), args...).Slice()
	if err != nil {
		return quota.Decision{}, s.fail("reserve", ks.key, reserveScript, err)
	}
	return s.decision(ks, args, res, local, r)
}

// decision reads the script's reserve reply res to r, which ran with ARGV
// args.
func (s *Store) decision(ks *keyState, args, res []any, local time.Time, r quota.Reservation) (quota.Decision, error) {
	op := "reserve " + ks.key.String()
	if len(res) > 0 && res[0] == int64(0) {
		o, err := decodeOversize(op, res)
		if err != nil {
			return quota.Decision{}, err
		}
		k := ks.root
		if o.own {
			k = ks.key
		}
		return quota.Decision{}, &quota.OversizeError{Key: k, Axis: o.axis, Cost: o.cost, Capacity: o.capacity, Priority: r.Priority}
	}
	if tenant, ok := tenantOf(res); ok {
		return quota.Decision{}, storekit.WrongTenantError(r.Key, r.Ticket, tenant)
	}
	rep, err := decodeReserve(op, res, len(ks.views), len(ks.zones))
	if err != nil {
		return quota.Decision{}, err
	}
	ks.remember(rep.epochs, rep.windows)
	at := s.timeFrom(rep.now, local)
	// The reply's durations ran from the script's now: what the reply took
	// to arrive beyond the fastest one is already spent (see replyDelay).
	// A test clock does not move while a reply travels, and needs no
	// StartDelay to keep its calls in step with the gates.
	var late, delay time.Duration
	if s.clock == nil {
		late = s.delay.late(rep.now, time.Now())
		if ks.paced {
			delay = s.startDelay
		}
	}
	d := quota.Decision{
		Outcome:     rep.outcome,
		Wait:        since(durationOf(rep.wait), late),
		Reason:      rep.reason,
		Axis:        rep.axis,
		PauseReason: rep.pauseReason,
		Charged:     rep.charged,
		Lease:       rep.leased,
	}
	if rep.spent != spentNone {
		d.Reason, d.Budget = quota.DailyLimit, ks.root
		if rep.spent == spentOwn {
			d.Budget = ks.key
		}
		if d.Axis.Spend() {
			d.Reason = quota.BudgetSpent
		}
	}
	if rep.leased {
		d.LeaseExpiry = at(rep.leaseExpiry)
	}
	if rep.granted {
		d.GrantLeft = since(durationOf(rep.grantExpiry-rep.now), late)
	}
	if d.Outcome == quota.Granted { // a grant's wait is its start
		d.Start, d.Delay, d.Wait = since(durationOf(rep.wait)+delay, late), since(delay, late), 0
		s.granted.add(ks, r.Ticket, ks.decidedIn(args, rep.epochs), d.GrantLeft)
	}
	return d, nil
}

// Settle implements quota.Store: the cost, the lease and the observations
// in one EVALSHA.
func (s *Store) Settle(ctx context.Context, st quota.Settlement) error {
	if err := st.Validate(); err != nil {
		return err
	}
	ks, err := s.lookup(st.Key)
	if err != nil {
		return err
	}
	spend, err := ks.spend(st.Actual)
	if err != nil {
		return err
	}
	nowArg, local := s.now()
	a := st.Actual
	var counted any = "0"
	if st.Counted {
		counted = "1"
	}
	c := st.Charged
	proofs := s.granted.proofs(ks, st.Ticket)
	args := append(ks.args(nowArg, st.Key.Tenant, "1", local, 19+3*len(st.Observed)),
		a.Requests, a.Tokens, a.InputTokens, a.OutputTokens, spend, st.Ticket, proofs[0], proofs[1],
		ks.prompt(st.Prompt), counted, ks.calib[0], ks.calib[1], ks.calib[2],
		c.Requests, c.Tokens, c.InputTokens, c.OutputTokens, ks.metered(c.Spend))
	args, _ = observations(ks.rootPolicy, args, st.Observed)
	res, err := settleScript.Run(ctx, s.rdb, ks.keys(st.Ticket), args...).Result()
	if err != nil {
		return s.fail("settle", ks.key, settleScript, err)
	}
	if tenant, ok := tenantOf(res); ok {
		return storekit.WrongTenantError(st.Key, st.Ticket, tenant)
	}
	s.granted.done(ks, st.Ticket)
	switch res {
	case int64(1):
		return nil
	case int64(0):
		return fmt.Errorf("redis: settle %s ticket %q: %w", ks.key, st.Ticket, quota.ErrUnknownTicket)
	}
	return fmt.Errorf("redis: settle %s: unexpected script reply %v", ks.key, res)
}

// Cancel implements quota.Store. An empty ticket is an *quota.InvalidError.
func (s *Store) Cancel(ctx context.Context, key quota.Key, ticket string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.ValidateTicket(ticket); err != nil {
		return err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return err
	}
	nowArg, local := s.now()
	args := append(ks.args(nowArg, key.Tenant, "1", local, 1), ticket)
	res, err := cancelScript.Run(ctx, s.rdb, ks.keys(ticket), args...).Result()
	if err != nil {
		return s.fail("cancel", ks.key, cancelScript, err)
	}
	if tenant, ok := tenantOf(res); ok {
		return storekit.WrongTenantError(key, ticket, tenant)
	}
	s.granted.done(ks, ticket)
	return nil
}

// Renew implements quota.Store: the ticket's record and its lease are
// extended in one script run.
func (s *Store) Renew(ctx context.Context, key quota.Key, ticket string, ttl time.Duration) (time.Duration, error) {
	if err := key.Validate(); err != nil {
		return 0, err
	}
	if err := storekit.ValidateRenewal(ticket, ttl); err != nil {
		return 0, err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return 0, err
	}
	nowArg, local := s.now()
	proofs := s.granted.proofs(ks, ticket)
	args := append(ks.args(nowArg, key.Tenant, "1", local, 4), ticket, ks.ttl(ttl), proofs[0], proofs[1])
	res, err := renewScript.Run(ctx, s.rdb, ks.keys(ticket), args...).Result()
	if err != nil {
		return 0, s.fail("renew", ks.key, renewScript, err)
	}
	if tenant, ok := tenantOf(res); ok {
		return 0, storekit.WrongTenantError(key, ticket, tenant)
	}
	left, ok := res.(string)
	if !ok {
		return 0, fmt.Errorf("redis: renew %s: unexpected script reply %v", ks.key, res)
	}
	if left == "" {
		return 0, fmt.Errorf("redis: renew %s ticket %q: %w", ks.key, ticket, quota.ErrUnknownTicket)
	}
	us, err := strconv.ParseFloat(left, 64)
	if err != nil {
		return 0, fmt.Errorf("redis: renew %s: unexpected script reply %q", ks.key, left)
	}
	s.granted.renewed(ks, ticket, durationOf(us))
	return durationOf(us), nil
}

// Pause implements quota.Store: the script adds d to Redis TIME.
func (s *Store) Pause(ctx context.Context, key quota.Key, d time.Duration, reason quota.PauseReason) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := reason.Validate(); err != nil {
		return err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	nowArg, local := s.now()
	var lesson any = "0"
	if axis, ok := reason.Lesson(); ok {
		lesson = "*"
		if axis != 0 {
			lesson = strconv.Itoa(int(axis))
		}
	}
	args := append(ks.args(nowArg, key.Tenant, "1", local, 3), micros(d), string(reason), lesson)
	if err := pauseScript.Run(ctx, s.rdb, ks.keys(""), args...).Err(); err != nil {
		return s.fail("pause", ks.key, pauseScript, err)
	}
	return nil
}

// Observe implements quota.Store.
func (s *Store) Observe(ctx context.Context, key quota.Key, obs []quota.Observation) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.ValidateObservations(obs); err != nil {
		return err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return err
	}
	nowArg, local := s.now()
	args, m := observations(ks.policy, ks.args(nowArg, key.Tenant, "1", local, 1+3*len(obs)), obs)
	if m == 0 {
		return nil
	}
	if err := observeScript.Run(ctx, s.rdb, ks.keys(""), args...).Err(); err != nil {
		return s.fail("observe", ks.key, observeScript, err)
	}
	return nil
}

// Snapshot implements quota.Store. It only reads (EVALSHA_RO), so a
// replica may serve it and a /metrics scrape writes nothing.
func (s *Store) Snapshot(ctx context.Context, key quota.Key) (quota.Snapshot, error) {
	if err := key.Validate(); err != nil {
		return quota.Snapshot{}, err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return quota.Snapshot{}, err
	}
	nowArg, local := s.now()
	args := append(ks.args(nowArg, key.Tenant, "1", local, 3), ks.calib[:]...)
	res, err := s.readOnly(ctx, snapshotScript, ks.keys(""), args)
	if err != nil {
		return quota.Snapshot{}, s.fail("snapshot", ks.key, snapshotScript, err)
	}
	rep, err := decodeSnapshot("snapshot "+ks.key.String(), res, len(ks.limited))
	if err != nil {
		return quota.Snapshot{}, err
	}
	at := s.timeFrom(rep.now, local)
	snap := quota.Snapshot{Key: ks.key, At: at(rep.now), PauseReason: rep.pauseReason, EstimateRatio: rep.ratio,
		Margin: rep.margin, Unreadable: rep.unreadable, Line: rep.line}
	if rep.paused {
		snap.PausedUntil = at(rep.pausedUntil)
	}
	for _, a := range rep.axes {
		l := quota.AxisLevel{Axis: a.axis, Capacity: a.capacity, Available: a.available, Burst: a.burst, Margin: a.margin}
		if a.resets {
			l.ResetAt = at(a.resetAt)
		}
		snap.Axes = append(snap.Axes, l)
	}
	return snap, nil
}
