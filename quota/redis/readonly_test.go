package redis

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusesReadOnly: the snapshot falls back to EVALSHA only where the
// server cannot run a script read-only, never for a write the script itself
// makes (Redis's own refusal reads "from read-only scripts").
func TestRefusesReadOnly(t *testing.T) {
	for msg, want := range map[string]bool{
		"ERR Error compiling script (new function): :75: Write commands are not allowed in read-only scripts": true, // miniredis, on TIME
		"ERR unknown command `evalsha_ro`, with args beginning with: `abc`, `1`":                              true, // Redis 6
		"ERR Write commands are not allowed from read-only scripts. script: abc, on @user_script:75.":         false,
		"NOSCRIPT No matching script. Please use EVAL.":                                                       false,
		"ERR user_script:12: attempt to perform arithmetic on a nil value":                                    false,
	} {
		require.Equal(t, want, refusesReadOnly(errors.New(msg)), msg)
	}
}
