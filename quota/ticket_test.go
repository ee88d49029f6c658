package quota_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/quota"
)

func TestTicketForIsAFixedLengthDigest(t *testing.T) {
	long := strings.Repeat("w", 1000)
	seen := map[string][]string{}
	for _, parts := range [][]string{
		{"default", "wf", "run", "1"},
		{"default", "wf", "run", "2"},
		{"default", "wf/run", "1"},
		{"default", "wf", "run/1"},
		{"default", long, "run", "1"},
		{"default", long + "x", "run", "1"},
		{""},
		{},
	} {
		ticket := quota.TicketFor(parts...)
		require.Len(t, ticket, 64, "%q: a SHA-256 digest in hex", parts)
		require.LessOrEqual(t, len(ticket), quota.MaxTicketLen)
		require.Equal(t, ticket, quota.TicketFor(parts...), "the same identity, the same ticket")
		prev, dup := seen[ticket]
		require.False(t, dup, "%q and %q share a ticket", parts, prev)
		seen[ticket] = parts
		r := quota.Reservation{Key: quota.Key{Provider: "openai", Model: "gpt-4o"}, Ticket: ticket, Cost: quota.Cost{Requests: 1}}
		require.NoError(t, r.Validate())
	}
}

func ExampleTicketFor() {
	// An activity's identity, however long its workflow id.
	ticket := quota.TicketFor("default", strings.Repeat("order-", 150), "0193c1f2-run", "5")
	fmt.Println(len(ticket))
	// Output: 64
}
