package interceptor

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
)

// budget is what one governed activity has spent of its retry budgets. It
// must survive attempts, which run on any worker, so it travels in the
// activity's heartbeat details: the last detail, after the activity's own,
// marked so it is never mistaken for them. The SDK sends the last heartbeat
// with a failed attempt and the server hands it to the next one.
type budget struct {
	// Marker is always budgetMarker.
	Marker string `json:"tollgate_budget"`
	// RateLimited counts provider rate-limit and overload answers.
	RateLimited int `json:"rate_limited"`
	// Transient counts transport failures and 5xx answers, and attempts
	// lost without an answer (see Running).
	Transient int `json:"transient"`
	// Running is the attempt whose activity recorded this budget with a
	// heartbeat of its own, while it ran; 0 once the attempt ended through
	// the interceptor, which records the budget again. An attempt that
	// finds an earlier attempt's number here knows that one was lost: its
	// worker died or stopped heartbeating and the server timed it out,
	// with nobody left to count it.
	Running int32 `json:"running,omitempty"`
	// Member is, for a call on a pool, the member it was last admitted
	// on (a quota.Key's String), which the next attempt asks first: a
	// place or grant held there is found, not left to lapse.
	Member string `json:"member,omitempty"`
}

const budgetMarker = "v1"

// maxHeartbeatDetails bounds how many heartbeat details are read back.
const maxHeartbeatDetails = 32

// attempt is the state of one governed attempt, reachable from the outbound
// interceptor through the activity context.
type attempt struct {
	mu sync.Mutex
	// budget as carried in from the previous attempt, then updated.
	budget budget
	// user is the activity's own latest heartbeat details: raw values from
	// the previous attempt, replaced by what it records in this one.
	user []any
	// inherited is how many details the activity itself left in the
	// previous attempt: what activity.GetHeartbeatDetails may read.
	inherited int
	// number is this attempt's number (activity.Info.Attempt).
	number int32
	// heartbeated: the activity recorded heartbeats in this attempt.
	heartbeated bool
	// beat is when the attempt started or the activity last heartbeated,
	// in unix ns: the grant is renewed only while the activity shows it
	// is alive (see keep).
	beat atomic.Int64
}

type attemptKey struct{}

func attemptFrom(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// load reads the heartbeat details the previous attempt left and splits
// them into Tollgate's budget and the activity's own details.
func (a *attempt) load(ctx context.Context, out interceptor.ActivityOutboundInterceptor) {
	a.beat.Store(time.Now().UnixNano())
	a.budget = budget{Marker: budgetMarker}
	if !out.HasHeartbeatDetails(ctx) {
		return
	}
	raws := make([]converter.RawValue, maxHeartbeatDetails)
	ptrs := make([]any, len(raws))
	for i := range raws {
		ptrs[i] = &raws[i]
	}
	if err := out.GetHeartbeatDetails(ctx, ptrs...); err != nil {
		return
	}
	n := 0
	for n < len(raws) && raws[n].Payload() != nil {
		n++
	}
	if n > 0 {
		if b, ok := decodeBudget(raws[n-1]); ok {
			a.budget = b
			n--
		}
	}
	a.inherited = n
	a.user = make([]any, n)
	for i := range n {
		a.user[i] = raws[i]
	}
}

func decodeBudget(raw converter.RawValue) (budget, bool) {
	p := raw.Payload()
	if string(p.GetMetadata()[converter.MetadataEncoding]) != converter.MetadataEncodingJSON {
		return budget{}, false
	}
	var b budget
	if err := json.Unmarshal(p.GetData(), &b); err != nil || b.Marker != budgetMarker {
		return budget{}, false
	}
	return b, true
}

// lastBeat returns when the attempt started or the activity last
// heartbeated, whichever is later.
func (a *attempt) lastBeat() time.Time { return time.Unix(0, a.beat.Load()) }

// spend adds one to a counter of a's budget and returns its new value. The
// lock keeps it apart from a heartbeat the activity may still be sending.
func (a *attempt) spend(counter *int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	*counter++
	return *counter
}

// setMember records the pool member the call is held on.
func (a *attempt) setMember(m string) {
	a.mu.Lock()
	a.budget.Member = m
	a.mu.Unlock()
}

// save records the budget (after the activity's own details) so the next
// attempt reads it back.
func (a *attempt) save(ctx context.Context, out interceptor.ActivityOutboundInterceptor) {
	a.mu.Lock()
	details := append(append(make([]any, 0, len(a.user)+1), a.user...), a.budget)
	a.mu.Unlock()
	out.RecordHeartbeat(ctx, details...)
}

// activityOutbound keeps the activity's view of its heartbeat details free of
// Tollgate's budget.
type activityOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
}

func (o *activityOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	a := attemptFrom(ctx)
	if a == nil {
		o.Next.RecordHeartbeat(ctx, details...)
		return
	}
	a.beat.Store(time.Now().UnixNano())
	a.mu.Lock()
	a.user = append(a.user[:0:0], details...)
	a.budget.Running, a.heartbeated = a.number, true
	a.mu.Unlock()
	a.save(ctx, o.Next)
}

// ran marks the activity's run over: the budget no longer names a running
// attempt. It is recorded with the interceptor's next save, or by
// saveIfHeartbeated where none follows.
func (a *attempt) ran() {
	a.mu.Lock()
	a.budget.Running = 0
	a.mu.Unlock()
}

// saveIfHeartbeated records the budget when the activity heartbeated in
// this attempt, so its last heartbeat (naming this attempt as running) is
// not what the next attempt reads, and taken for a lost attempt.
func (a *attempt) saveIfHeartbeated(ctx context.Context, out interceptor.ActivityOutboundInterceptor) {
	a.mu.Lock()
	h := a.heartbeated
	a.mu.Unlock()
	if h {
		a.save(ctx, out)
	}
}

func (o *activityOutbound) HasHeartbeatDetails(ctx context.Context) bool {
	a := attemptFrom(ctx)
	if a == nil {
		return o.Next.HasHeartbeatDetails(ctx)
	}
	return a.inherited > 0
}

func (o *activityOutbound) GetHeartbeatDetails(ctx context.Context, d ...any) error {
	a := attemptFrom(ctx)
	if a == nil {
		return o.Next.GetHeartbeatDetails(ctx, d...)
	}
	// The activity's details come first, so asking for no more than it
	// left leaves the budget out.
	if len(d) > a.inherited {
		d = d[:a.inherited]
	}
	return o.Next.GetHeartbeatDetails(ctx, d...)
}
