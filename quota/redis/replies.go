package redis

import (
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/quota"
)

// The scripts' replies, decoded into named fields. A reply that does not
// have the form its script's header gives is an error naming the field,
// never a zero value read on.

// reserveReply is lua/tickets.lua's reply for a decision.
type reserveReply struct {
	outcome     quota.Outcome
	wait        float64 // µs; for a grant, until its start
	reason      quota.Reason
	axis        quota.Axis
	pauseReason quota.PauseReason
	leased      bool
	leaseExpiry float64 // µs, when leased
	now         float64 // µs
	charged     quota.Cost
	granted     bool
	grantExpiry float64 // µs, when granted
	epochs      []any   // per budget: its new epoch, or 0 when the caller knew it
	windows     []string
	spent       spentIn // whose window refused the call
}

// spentIn says which budget's window a refusal found spent.
type spentIn uint8

const (
	spentNone spentIn = iota
	spentRoot         // reason 2: the root's
	spentOwn          // reason 5: the tenant's own
)

// oversizeReply is reserve.lua's reply for a cost that can never fit.
type oversizeReply struct {
	axis     quota.Axis
	cost     int64
	capacity int64
	own      bool // the budget is the tenant's own
}

// snapshotReply is snapshot.lua's reply.
type snapshotReply struct {
	now, pausedUntil float64
	paused           bool
	pauseReason      quota.PauseReason
	ratio            float64
	margin           quota.Margin
	unreadable       int64
	axes             []axisReply
	line             []quota.TenantLine
}

type axisReply struct {
	axis             quota.Axis
	capacity         int64
	available, burst float64
	resets           bool
	resetAt          float64
	margin           quota.Margin
}

// reader reads a reply's fields in order, keeping the first error.
type reader struct {
	op  string
	res []any
	i   int
	err error
}

func (r *reader) next(field string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	if r.i >= len(r.res) {
		r.err = fmt.Errorf("redis: %s: script reply %v ends before its %s", r.op, r.res, field)
		return nil, false
	}
	r.i++
	return r.res[r.i-1], true
}

func (r *reader) fail(field string, v any) {
	r.err = fmt.Errorf("redis: %s: script reply %v has %s %#v, not a number", r.op, r.res, field, v)
}

// float reads a number: an integer, or one formatted as a string.
func (r *reader) float(field string) float64 {
	v, ok := r.next(field)
	if !ok {
		return 0
	}
	switch v := v.(type) {
	case int64:
		return float64(v)
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	r.fail(field, v)
	return 0
}

func (r *reader) int(field string) int64 { return int64(r.float(field)) }

// optional reads a number, or an empty string for none.
func (r *reader) optional(field string) (float64, bool) {
	if r.i < len(r.res) && r.res[r.i] == "" {
		r.i++
		return 0, false
	}
	return r.float(field), r.err == nil
}

func (r *reader) string(field string) string {
	v, ok := r.next(field)
	if !ok {
		return ""
	}
	s, isString := v.(string)
	if !isString {
		r.err = fmt.Errorf("redis: %s: script reply %v has %s %#v, not a string", r.op, r.res, field, v)
	}
	return s
}

// margin reads a margin, "burst rate refused", or an empty string (none).
func (r *reader) margin(field string) quota.Margin {
	s := r.string(field)
	if s == "" || r.err != nil {
		return quota.Margin{}
	}
	var m quota.Margin
	if _, err := fmt.Sscanf(s, "%g %g %g", &m.Burst, &m.Rate, &m.Refused); err != nil {
		r.err = fmt.Errorf("redis: %s: script reply %v has %s %q, not \"burst rate refused\"", r.op, r.res, field, s)
	}
	return m
}

// done checks that the reply has no field left.
func (r *reader) done() error {
	if r.err == nil && r.i != len(r.res) {
		r.err = fmt.Errorf("redis: %s: script reply %v has %d fields past its last", r.op, r.res, len(r.res)-r.i)
	}
	return r.err
}

func (r *reader) cost(field string) quota.Cost {
	return quota.Cost{Requests: r.int(field + " requests"), Tokens: r.int(field + " tokens"),
		InputTokens: r.int(field + " input tokens"), OutputTokens: r.int(field + " output tokens"), Spend: r.int(field + " spend")}
}

// decodeReserve reads a decision for budgets budgets with windows daily
// limits.
func decodeReserve(op string, res []any, budgets, windows int) (reserveReply, error) {
	r := &reader{op: op, res: res}
	var d reserveReply
	d.outcome = quota.Outcome(r.int("outcome"))
	d.wait = r.float("wait")
	switch reason := r.int("reason"); reason {
	case 2:
		d.spent = spentRoot
	case 5:
		d.spent = spentOwn
	default:
		d.reason = quota.Reason(reason)
	}
	d.axis = quota.Axis(r.int("axis"))
	d.pauseReason = quota.PauseReason(r.string("pause reason"))
	d.leaseExpiry, d.leased = r.optional("lease expiry")
	d.now = r.float("now")
	d.charged = r.cost("charged")
	d.grantExpiry, d.granted = r.optional("grant expiry")
	for range budgets {
		if v, ok := r.next("epoch"); ok {
			d.epochs = append(d.epochs, v)
		}
	}
	for range windows {
		d.windows = append(d.windows, r.string("daily window"))
	}
	if err := r.done(); err != nil {
		return reserveReply{}, err
	}
	if d.outcome < quota.Granted || d.outcome > quota.Refused {
		return reserveReply{}, fmt.Errorf("redis: %s: script reply %v has outcome %d", op, res, d.outcome)
	}
	return d, nil
}

// decodeOversize reads reserve.lua's {0, axis, cost, capacity, own}.
func decodeOversize(op string, res []any) (oversizeReply, error) {
	r := &reader{op: op, res: res[1:]}
	o := oversizeReply{axis: quota.Axis(r.int("axis")), cost: r.int("cost"), capacity: r.int("capacity"), own: r.int("own") == 1}
	return o, r.done()
}

// decodeSnapshot reads snapshot.lua's reply for a budget of axes limits.
func decodeSnapshot(op string, res []any, axes int) (snapshotReply, error) {
	r := &reader{op: op, res: res}
	var s snapshotReply
	s.now = r.float("now")
	s.pausedUntil, s.paused = r.optional("paused until")
	s.pauseReason = quota.PauseReason(r.string("pause reason"))
	s.ratio = r.float("estimate ratio")
	s.margin = quota.Margin{Burst: r.float("margin burst"), Rate: r.float("margin rate"), Refused: r.float("margin refused")}
	s.unreadable = r.int("unreadable")
	for range axes {
		a := axisReply{axis: quota.Axis(r.int("axis")), capacity: r.int("capacity"), available: r.float("available")}
		a.resetAt, a.resets = r.optional("reset")
		a.burst = r.float("burst")
		a.margin = r.margin("margin")
		s.axes = append(s.axes, a)
	}
	for r.err == nil && r.i < len(r.res) {
		l := quota.TenantLine{Tenant: r.string("tenant")}
		l.Tickets = int(r.int("tickets"))
		l.Cost = r.cost("line cost")
		s.line = append(s.line, l)
	}
	return s, r.done()
}

// tenantOf reads a {-1, tenant} reply: a ticket reserved under another
// tenant.
func tenantOf(res any) (string, bool) {
	r, ok := res.([]any)
	if !ok || len(r) != 2 {
		return "", false
	}
	if n, ok := r[0].(int64); !ok || n != -1 {
		return "", false
	}
	t, ok := r[1].(string)
	return t, ok
}
