package memory

import "github.com/tollgate/tollgate/quota"

// Tickets returns how many tickets the store holds in the tree of k's
// budget (the account's, for a tenant nested in it).
func Tickets(s *Store, k quota.Key) int {
	sc, err := s.scope(k)
	if err != nil {
		return -1
	}
	tr := sc.root.tree
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.tickets.index)
}
