package memory

import "github.com/tollgate/tollgate/quota"

// Tickets returns how many tickets the store holds for k's budget.
func Tickets(s *Store, k quota.Key) int {
	ks, err := s.state(k)
	if err != nil {
		return -1
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return len(ks.tickets.index)
}
