package quota

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// ticketLen is the length of every ticket TicketFor returns, in bytes.
const ticketLen = 2 * sha256.Size

// TicketFor returns the ticket of the identity given by parts (for an
// activity: its namespace, workflow id, run id and activity id): the
// SHA-256 digest of the parts, in hex, so it is 64 bytes however long
// the parts are. Each part is prefixed with its length before hashing, so
// ("a/b", "c") and ("a", "b/c") give different tickets. It is safe for
// concurrent use.
func TicketFor(parts ...string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}
