// Package tune holds the constants the quota package's Go code and the
// Redis store's Lua scripts share, so that both read one definition.
package tune

// RatioFall is the share of the way down to a lower sample a learned
// estimate ratio takes per sample (storekit.Ratio.Learn): 1 → 0.7 is within
// 1 % in 6 calls. Lower means fewer 429s from a key whose prompts
// alternate between sparse and dense text, and more goodput lost while a
// key that was charged high learns it was.
const RatioFall = 0.5

// Sweep is how many lapsed tickets one operation on a budget may forget
// (refunding the queued ones), so that no call pays for many.
const Sweep = 4

// MaxCapacity is the largest capacity a limit may have, and the largest
// an adopted one is capped to (2^50), so that every level stays exactly
// representable as a float64 in Lua and in Go.
const MaxCapacity = 1 << 50
