// Package storekit holds what every quota.Store implementation shares and a
// caller of one never needs: the checks of a Store method's arguments, the
// errors a Store answers, and the arithmetic of what a Store learns per key
// (the estimate ratio and the margin of its provider's limiter). The memory
// and Redis stores use it; so can a third, checked by quota/quotatest.
package storekit
