package llmsim

import (
	"encoding/binary"
	"hash/fnv"
	"time"
)

// The prompt cache. Each account's model keeps a cache of prompt prefixes,
// as the providers do:
//
//   - Anthropic caches what the caller marks: a prefix (tools, then the
//     system prompt, then the messages) ending at a cache_control
//     breakpoint (on a tool, a system block or a message's block) is
//     written when the call is answered, and read by a later call whose
//     prompt starts with it. Its usage reports cache_read_input_tokens and
//     cache_creation_input_tokens, and input_tokens is the rest; the
//     input-tokens-per-minute bucket counts input_tokens plus
//     cache_creation_input_tokens, not the tokens read from the cache, as
//     Anthropic documents for its current models.
//   - OpenAI and Gemini cache every prompt on their own: each message
//     boundary of a prompt is written, and a later call reads the longest
//     one it starts with. OpenAI reports
//     usage.prompt_tokens_details.cached_tokens and Gemini
//     usageMetadata.cachedContentTokenCount, both within the prompt's
//     tokens; their token buckets count the whole prompt.
//
// A prefix shorter than Model.CacheMinTokens is not cached. An entry lives
// Model.CacheTTL after it was last written or read, by the Sim's clock.
// Prefixes are matched at the boundaries of tools, system prompt and
// messages (not of each block), which is as fine as an agent's turns.

// Defaults of the prompt cache.
const (
	// DefaultCacheTTL is how long a cached prefix lives unread: the
	// 5 minutes of Anthropic's default cache and OpenAI's in-memory one.
	DefaultCacheTTL = 5 * time.Minute
	// DefaultCacheMinTokens is the shortest prefix cached: 1024 tokens,
	// the minimum of OpenAI, of most Claude models and of Gemini 2.5 Flash.
	DefaultCacheMinTokens = 1024
)

// mark is a prefix boundary of a call's prompt: the hash of everything up
// to it, its length in characters, and whether the caller put a cache
// breakpoint there (Anthropic cache_control).
type mark struct {
	hash       uint64
	chars      int64
	breakpoint bool
}

// mark records a prefix boundary after raw (the item just parsed, whose
// characters c.chars already counts).
func (c *call) mark(raw []byte, breakpoint bool) {
	h := fnv.New64a()
	var prev [8]byte
	if n := len(c.marks); n > 0 {
		binary.BigEndian.PutUint64(prev[:], c.marks[n-1].hash)
	}
	h.Write(prev[:])
	h.Write(raw)
	c.marks = append(c.marks, mark{hash: h.Sum64(), chars: c.chars, breakpoint: breakpoint})
}

// promptCache is one account's cache on one model: prefix hash → expiry.
type promptCache map[uint64]time.Time

// cacheTTL and cacheMinTokens are the model's, or the defaults.
func (m Model) cacheTTL() time.Duration {
	if m.CacheTTL == 0 {
		return DefaultCacheTTL
	}
	return m.CacheTTL
}

func (m Model) cacheMinTokens() int64 {
	if m.CacheMinTokens == 0 {
		return DefaultCacheMinTokens
	}
	return m.CacheMinTokens
}

// explicit reports whether provider caches only what the caller marks.
func explicit(provider string) bool { return provider == Anthropic }

// read sets c.cacheRead to the tokens of the longest cached prefix c
// starts with, and c.cacheWrite to the tokens its answer will write beyond
// them (what Anthropic reports as cache_creation_input_tokens): its
// breakpoints; Anthropic alone reports them. Nothing is written until
// write.
func (pc promptCache) read(c *call, now time.Time) {
	c.cacheRead, c.cacheWrite = 0, 0
	for i := len(c.marks) - 1; i >= 0; i-- {
		mk := c.marks[i]
		if exp, ok := pc[mk.hash]; ok && now.Before(exp) {
			c.cacheRead, c.hit = min(c.spec.tokens(mk.chars), c.input), mk.hash
			break
		}
	}
	if !explicit(c.spec.Provider) {
		return // OpenAI and Gemini report no cache writes
	}
	for _, mk := range c.marks {
		if t := pc.cacheable(*c, mk); t > 0 {
			c.cacheWrite = max(c.cacheWrite, t-c.cacheRead)
		}
	}
}

// cacheable is the tokens of the prefix ending at mk when c writes it to
// the cache, else 0.
func (pc promptCache) cacheable(c call, mk mark) int64 {
	if explicit(c.spec.Provider) && !mk.breakpoint {
		return 0
	}
	t := min(c.spec.tokens(mk.chars), c.input)
	if t < c.spec.cacheMinTokens() {
		return 0
	}
	return t
}

// write caches c's prefixes, as read said, and refreshes the entry it
// read.
func (pc promptCache) write(c call, now time.Time) {
	exp := now.Add(c.spec.cacheTTL())
	if c.cacheRead > 0 {
		pc[c.hit] = exp
	}
	for _, mk := range c.marks {
		if pc.cacheable(c, mk) > 0 {
			pc[mk.hash] = exp
		}
	}
	if len(pc) > 4096 {
		for h, exp := range pc {
			if !now.Before(exp) {
				delete(pc, h)
			}
		}
	}
}
