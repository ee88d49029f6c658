// Package quotatest is the conformance suite every quota.Store must pass, and
// the fake Clock it runs on.
//
// A store's own test calls Run with a Factory that builds the store over the
// given Policies and Clock:
//
//	func TestConformance(t *testing.T) {
//		quotatest.Run(t, func(t *testing.T, ps quota.Policies, clock quota.Clock) quota.Store {
//			s, err := memory.New(ps, memory.Options{Clock: clock})
//			require.NoError(t, err)
//			return s
//		})
//	}
//
// Every subtest builds its own policies under key names no other subtest (and
// no other call of Run) uses, so a backend shared between subtests needs no
// flushing. The assertions are exact: waits and levels follow from the
// arithmetic of the semantics, with tolerances only for float rounding (1e-6
// on levels) and for stores whose clock has microsecond resolution (1ms on
// waits and times).
package quotatest
