package released

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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

// maxCapacity is the largest capacity a quota.Limit may have (2^50): an
// adopted limit is capped to it so levels stay exact as doubles in Lua.
const maxCapacity = 1 << 50

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
}

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
	s := &Store{rdb: rdb, clock: opts.Clock, ps: ps, keys: make(map[quota.Key]*keyState), weights: make(map[quota.Key]any)}
	name := epochName()
	for _, k := range ps.Keys() {
		_, p, _ := ps.Lookup(k)
		_, ap, nested := ps.Account(k)
		s.keys[k] = newKeyState(prefix, k, p, ap, nested, name)
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
	nowArg, local := s.now()
	var low, place any = "0", "0" // constants box without allocating
	if r.Priority == quota.Low {
		low = "1"
	}
	if r.Place {
		place = "1"
	}
	args := append(ks.args("reserve", nowArg, r.Key.Tenant, s.weight(r.Key), local, 12), r.Ticket, low,
		r.Cost.Requests, r.Cost.Tokens, r.Cost.InputTokens, r.Cost.OutputTokens,
		ks.prompt(r.Prompt), ks.calib[0], ks.calib[1], ks.calib[2],
		ks.ttl(r.LeaseTTL), place)
	res, err := script.Run(ctx, s.rdb, ks.keys(r.Ticket), args...).Slice()
	if err != nil {
		return quota.Decision{}, s.fail("reserve", ks.key, err)
	}
	return s.decision(ks, res, local, r)
}

// decision reads the script's reserve reply (see lua.go) to r.
func (s *Store) decision(ks *keyState, res []any, local time.Time, r quota.Reservation) (quota.Decision, error) {
	outcome := toInt(res, 0)
	if outcome == 0 && len(res) == 5 {
		k := ks.root
		if toInt(res, 4) == 1 {
			k = ks.key
		}
		return quota.Decision{}, &quota.OversizeError{Key: k, Axis: quota.Axis(toInt(res, 1)),
			Cost: toInt(res, 2), Capacity: toInt(res, 3), Priority: r.Priority}
	}
	if outcome == -1 && len(res) == 2 {
		return quota.Decision{}, storekit.WrongTenantError(r.Key, r.Ticket, toString(res, 1))
	}
	if len(res) != 12+len(ks.epochs)+len(ks.seen) || outcome < int64(quota.Granted) || outcome > int64(quota.Refused) {
		return quota.Decision{}, fmt.Errorf("redis: reserve %s: unexpected script reply %v", ks.key, res)
	}
	ks.remember(res[12:])
	at := s.timeFrom(toFloat(res, 6), local)
	d := quota.Decision{
		Outcome:     quota.Outcome(outcome),
		Wait:        durationOf(toFloat(res, 1)),
		Reason:      quota.Reason(toInt(res, 2)),
		Axis:        quota.Axis(toInt(res, 3)),
		PauseReason: quota.PauseReason(toString(res, 4)),
		Charged:     quota.Cost{Requests: toInt(res, 7), Tokens: toInt(res, 8), InputTokens: toInt(res, 9), OutputTokens: toInt(res, 10)},
	}
	if res[5] != "" { // an expiry is an integer or a formatted fraction
		d.Lease = true
		d.LeaseExpiry = at(toFloat(res, 5))
	}
	if res[11] != "" {
		d.GrantLeft = durationOf(toFloat(res, 11) - toFloat(res, 6))
	}
	if d.Outcome == quota.Granted { // a grant's wait is its start
		d.Start, d.Wait = d.Wait, 0
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
	nowArg, local := s.now()
	a := st.Actual
	var counted any = "0"
	if st.Counted {
		counted = "1"
	}
	c := st.Charged
	args := append(ks.args("settle", nowArg, st.Key.Tenant, "1", local, 17+3*len(st.Observed)),
		a.Requests, a.Tokens, a.InputTokens, a.OutputTokens, st.Ticket,
		ks.prompt(st.Prompt), counted, ks.calib[0], ks.calib[1], ks.calib[2],
		c.Requests, c.Tokens, c.InputTokens, c.OutputTokens, marginGains[0], marginGains[1])
	args, _ = observations(ks.rootPolicy, args, st.Observed)
	res, err := script.Run(ctx, s.rdb, ks.keys(st.Ticket), args...).Result()
	if err != nil {
		return s.fail("settle", ks.key, err)
	}
	if err := wrongTenant(res, st.Key, st.Ticket); err != nil {
		return err
	}
	if n, _ := res.(int64); n == 0 {
		return fmt.Errorf("redis: settle %s ticket %q: %w", ks.key, st.Ticket, quota.ErrUnknownTicket)
	}
	return nil
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
	args := append(ks.args("cancel", nowArg, key.Tenant, "1", local, 1), ticket)
	res, err := script.Run(ctx, s.rdb, ks.keys(ticket), args...).Result()
	if err != nil {
		return s.fail("cancel", ks.key, err)
	}
	return wrongTenant(res, key, ticket)
}

// wrongTenant reads a script reply {-1, tenant}: a ticket reserved under
// another tenant than key's.
func wrongTenant(res any, key quota.Key, ticket string) error {
	if r, ok := res.([]any); ok && len(r) == 2 && toInt(r, 0) == -1 {
		return storekit.WrongTenantError(key, ticket, toString(r, 1))
	}
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
	args := append(ks.args("renew", nowArg, key.Tenant, "1", local, 2), ticket, ks.ttl(ttl))
	res, err := script.Run(ctx, s.rdb, ks.keys(ticket), args...).Result()
	if err != nil {
		return 0, s.fail("renew", ks.key, err)
	}
	if err := wrongTenant(res, key, ticket); err != nil {
		return 0, err
	}
	left, _ := res.(string)
	if left == "" {
		return 0, fmt.Errorf("redis: renew %s ticket %q: %w", ks.key, ticket, quota.ErrUnknownTicket)
	}
	us, err := strconv.ParseFloat(left, 64)
	if err != nil {
		return 0, fmt.Errorf("redis: renew %s: unexpected script reply %q", ks.key, left)
	}
	return durationOf(us), nil
}

// Pause implements quota.Store: the script adds d to Redis TIME.
func (s *Store) Pause(ctx context.Context, key quota.Key, d time.Duration, reason quota.PauseReason) error {
	if err := key.Validate(); err != nil {
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
	if reason == quota.PauseRateLimited {
		lesson = "1"
	}
	args := append(ks.args("pause", nowArg, key.Tenant, "1", local, 7), micros(d), string(reason), lesson,
		marginCuts[0], marginCuts[1], marginCuts[2], marginCuts[3])
	if err := script.Run(ctx, s.rdb, ks.keys(""), args...).Err(); err != nil {
		return s.fail("pause", ks.key, err)
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
	args, m := observations(ks.policy, ks.args("observe", nowArg, key.Tenant, "1", local, 1+3*len(obs)), obs)
	if m == 0 {
		return nil
	}
	if err := script.Run(ctx, s.rdb, ks.keys(""), args...).Err(); err != nil {
		return s.fail("observe", ks.key, err)
	}
	return nil
}

// Snapshot implements quota.Store.
func (s *Store) Snapshot(ctx context.Context, key quota.Key) (quota.Snapshot, error) {
	if err := key.Validate(); err != nil {
		return quota.Snapshot{}, err
	}
	ks, err := s.lookup(key)
	if err != nil {
		return quota.Snapshot{}, err
	}
	nowArg, local := s.now()
	args := append(ks.args("snapshot", nowArg, key.Tenant, "1", local, 3), ks.calib[:]...)
	res, err := script.Run(ctx, s.rdb, ks.keys(""), args...).Slice()
	if err != nil {
		return quota.Snapshot{}, s.fail("snapshot", ks.key, err)
	}
	const head, per = 6, 5
	if len(res) < head+per*len(ks.limited) || (len(res)-head-per*len(ks.limited))%6 != 0 {
		return quota.Snapshot{}, fmt.Errorf("redis: snapshot %s: unexpected script reply %v", ks.key, res)
	}
	at := s.timeFrom(toFloat(res, 0), local)
	snap := quota.Snapshot{Key: ks.key, At: at(toFloat(res, 0)), PauseReason: quota.PauseReason(toString(res, 2)), EstimateRatio: toFloat(res, 3),
		Margin: quota.Margin{Burst: toFloat(res, 4), Rate: toFloat(res, 5)}}
	if toString(res, 1) != "" {
		snap.PausedUntil = at(toFloat(res, 1))
	}
	if len(ks.limited) > 0 {
		snap.Axes = make([]quota.AxisLevel, len(ks.limited))
	}
	for i := range ks.limited {
		j := head + per*i
		l := quota.AxisLevel{
			Axis:      quota.Axis(toInt(res, j)),
			Capacity:  int64(toFloat(res, j+1)),
			Available: toFloat(res, j+2),
			Burst:     toFloat(res, j+4),
		}
		if toString(res, j+3) != "" {
			l.ResetAt = at(toFloat(res, j+3))
		}
		snap.Axes[i] = l
	}
	for j := head + per*len(ks.limited); j < len(res); j += 6 {
		snap.Line = append(snap.Line, quota.TenantLine{Tenant: toString(res, j), Tickets: int(toInt(res, j+1)),
			Cost: quota.Cost{Requests: toInt(res, j+2), Tokens: toInt(res, j+3), InputTokens: toInt(res, j+4), OutputTokens: toInt(res, j+5)}})
	}
	return snap, nil
}

// marginCuts and marginGains are the learned margin's bounds, cuts and
// gains (quota.Margin) as the script's pause and settle read them.
var (
	marginCuts  = [4]any{fmtFloat(storekit.MinBurstMargin), fmtFloat(storekit.MinRateMargin), fmtFloat(storekit.BurstCut), fmtFloat(storekit.RateCut)}
	marginGains = [2]any{fmtFloat(1.0 / 200), fmtFloat(storekit.RateGain)} // that release's additive burst gain
)

// fmtFloat writes f without an exponent, which gopher-lua (miniredis) cannot parse.
func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// epochName returns a name for the epochs of key state a Store begins:
// random, so that every store's differ (see lua.go).
func epochName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func (s *Store) lookup(k quota.Key) (*keyState, error) {
	bucket, _, ok := s.ps.Lookup(k)
	if !ok {
		return nil, storekit.NoPolicyError(k)
	}
	return s.keys[bucket], nil
}

// now returns the script's "now" argument ("" for Redis TIME) and the local
// clock the daily midnights are computed around.
func (s *Store) now() (string, time.Time) {
	if s.clock == nil {
		return "", time.Now()
	}
	t := s.clock.Now()
	return strconv.FormatInt(t.UnixMicro(), 10), t
}

// timeFrom returns a converter from the script's unix µs to time.Time, given
// the script's now. With a test clock, times are offsets from the clock's
// reading, so they keep its location and sub-microsecond part.
func (s *Store) timeFrom(nowUS float64, local time.Time) func(float64) time.Time {
	if s.clock == nil {
		return func(us float64) time.Time { return time.UnixMicro(int64(math.Round(us))) }
	}
	return func(us float64) time.Time { return local.Add(durationOf(us - nowUS)) }
}

// fail wraps a failed script run: errors reaching Redis, and replies saying
// Redis cannot serve now, match quota.ErrUnavailable; a caller's cancelled
// context and script errors do not.
func (s *Store) fail(op string, k quota.Key, err error) error {
	if errors.Is(err, context.Canceled) || !unavailable(err) {
		return fmt.Errorf("redis: %s %s: %w", op, k, err)
	}
	return fmt.Errorf("redis: %s %s: %w: %w", op, k, quota.ErrUnavailable, err)
}

// unavailable reports whether err means the server could not serve the call
// (as opposed to rejecting it): network errors, timeouts, and replies from a
// server that is loading, read-only, failing over or busy.
func unavailable(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return true // dial, read and write errors, timeouts, a closed client
	}
	msg := rerr.Error()
	for _, p := range [...]string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// durationOf converts script µs to a Duration, rounded to the nanosecond.
func durationOf(us float64) time.Duration { return time.Duration(math.Round(us * 1e3)) }

func toInt(res []any, i int) int64 {
	switch v := res[i].(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseFloat(v, 64)
		return int64(n)
	}
	return 0
}

func toFloat(res []any, i int) float64 {
	switch v := res[i].(type) {
	case int64:
		return float64(v)
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return 0
}

func toString(res []any, i int) string {
	if v, ok := res[i].(string); ok {
		return v
	}
	return ""
}
