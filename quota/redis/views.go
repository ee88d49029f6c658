package redis

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A view is what a Store last saw of one budget's state, shared by every key
// charged to the budget (an account's own key and its tenants'): its epoch
// ("" for none) and, per daily limit, the window it last saw ("start used",
// or ""), as the scripts' replies gave them. A script that finds the state
// lost recovers it from them (see lua/recover.lua and lua/upkeep.lua).
type view struct {
	epoch atomic.Value
	seen  []atomic.Value
}

func newView(dailies int) *view {
	v := &view{seen: make([]atomic.Value, dailies)}
	v.epoch.Store("")
	for i := range v.seen {
		v.seen[i].Store("")
	}
	return v
}

// remember keeps what a reserve reply says of the budgets' states: their
// epochs, when the store did not know them (else nil), and their daily
// windows, in the order of ks.views.
func (ks *keyState) remember(epochs []any, windows []string) {
	for i, v := range ks.views {
		if e, ok := epochs[i].(string); ok && e != "" {
			v.epoch.Store(e)
		}
	}
	for _, v := range ks.views {
		for i := range v.seen {
			v.see(i, windows[0])
			windows = windows[1:]
		}
	}
}

// see keeps w as the view of daily limit i unless it already holds a later
// window or more used in the same one: replies may arrive out of order, and
// a view must never go back to less than its Store saw.
func (v *view) see(i int, w string) {
	for {
		old := v.seen[i].Load()
		if !later(w, old.(string)) || v.seen[i].CompareAndSwap(old, w) {
			return
		}
	}
}

// later reports whether window w ("start used", or "" for none) says more
// than old: a later start, or more used since the same one.
func later(w, old string) bool {
	ws, wu, ok := cutWindow(w)
	if !ok {
		return false
	}
	os, ou, ok := cutWindow(old)
	return !ok || ws > os || ws == os && wu > ou
}

func cutWindow(w string) (start int64, used float64, ok bool) {
	s, u, ok := strings.Cut(w, " ")
	if !ok {
		return 0, 0, false
	}
	start, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	used, err = strconv.ParseFloat(u, 64)
	return start, used, err == nil
}

// grants remembers, per ticket this Store was granted and has not yet
// settled or cancelled, the epochs of its budgets' states at the grant: the
// proof a script asks for before it lets the ticket take over a slot held
// for the calls in flight when the state was lost (see lua/recover.lua's
// regrant). Entries of grants never settled lapse with the grant.
type grants struct {
	mu      sync.Mutex
	m       map[string]grant
	inserts int
}

type grant struct {
	proofs  [2]any
	expires time.Time
}

// pruneEvery is how many grants are recorded between two sweeps of the
// lapsed ones.
const pruneEvery = 1024

// add records the grant of ticket on ks's root, made in the epochs proofs
// (keyState.decidedIn), living ttl.
func (g *grants) add(ks *keyState, ticket string, proofs [2]any, ttl time.Duration) {
	p := grant{proofs: proofs, expires: time.Now().Add(ttl)}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = make(map[string]grant)
	}
	g.m[ks.state+"\x00"+ticket] = p
	if g.inserts++; g.inserts >= pruneEvery {
		g.inserts = 0
		now := time.Now()
		for k, v := range g.m {
			if now.After(v.expires) {
				delete(g.m, k)
			}
		}
	}
}

// renewed extends ticket's grant on ks's root to live ttl.
func (g *grants) renewed(ks *keyState, ticket string, ttl time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.m[ks.state+"\x00"+ticket]; ok {
		p.expires = time.Now().Add(ttl)
		g.m[ks.state+"\x00"+ticket] = p
	}
}

// proofs returns the script arguments proving ticket's grant on ks's root
// ("", "" for a ticket this Store was not granted).
func (g *grants) proofs(ks *keyState, ticket string) [2]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p, ok := g.m[ks.state+"\x00"+ticket]; ok {
		return p.proofs
	}
	return [2]any{"", ""}
}

// done forgets ticket's grant on ks's root.
func (g *grants) done(ks *keyState, ticket string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, ks.state+"\x00"+ticket)
}
