package redis

import (
	"embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/internal/tune"
	"github.com/tollgate/tollgate/quota/storekit"
)

// The Store's operations are Lua scripts, one per operation, each made of
// the shared parts in lua/ it needs and its own file, with the constants
// they name written in from Go (constants). Each run is one EVALSHA, atomic
// for the key, so replicas never race between reading a level and charging
// it. Every file's header names the KEYS, ARGV and reply it deals in;
// common.lua's, those every operation shares.
//
// Lua numbers are doubles and Redis truncates them to integers on return, so
// every fractional value travels as a string formatted with %.17g (integers
// below 2^53 take %d, the same digits for less work), and replies return only
// integers below 2^53 as numbers. Parsing (strtod) and formatting are most of
// the scripts' own cost, so they do each once. A string that always holds a
// number (every argument the Store passes, Redis TIME) is read as s * 1:
// arithmetic converts it once, where tonumber converts it twice (lua_isnumber,
// then lua_tonumber), and * 1, unlike + 0, keeps -0. tonumber stays where a
// string may be missing or no number (the state, the records).

//go:embed lua/*.lua
var luaFiles embed.FS

// formatVersion is the version of the formats of the state, ticket records
// and queue members the scripts write (the state's field v). Format 1 is
// every release's since queue members took their place in line ("#q …"):
// a script reads every format it may meet and drops, counting it, a record
// or member it cannot read.
const formatVersion = 1

// constants are the names the scripts' files read for the Go values they
// mirror. compose writes each value in where its name stands, as a Lua
// literal, rather than as a local: Redis runs a script's whole chunk on
// every call, and each function it defines over a local is a closure
// that captures it, at a cost that grows with the locals captured before
// (Lua 5.1 walks its list of open upvalues), about 3 µs of an admission.
// Floats are written without an exponent, which gopher-lua (miniredis)
// cannot parse.
var constants = []struct {
	name  string
	value any
}{
	{"BUCKET", kindBucket}, {"DAILY", kindDaily}, {"LEASES", kindLeases},
	{"FORMAT", strconv.Itoa(formatVersion)},
	{"LEASE_RETRY", quota.DefaultLeaseRetry.Microseconds()},
	{"MIN_WAIT", time.Millisecond.Microseconds()}, // the shortest wait a full concurrency limit suggests
	{"EPSILON", 1e-9},                                                // units: float noise, not a deficit
	{"TICKET_GRACE", time.Hour.Milliseconds()},                       // ms a record outlives its own expiry
	{"SWEEP", tune.Sweep},                                            // lapsed queued tickets refunded per call
	{"EXACT", int64(1) << 53},                                        // doubles below it are exact integers
	{"FINISH_PRUNE", 64},                                             // tenants' tags a line keeps before it drops stale ones
	{"PLACEHOLDER", "\x00lost "},                                     // a placeholder lease's name, before its expiry and number
	{"RATIO_FALL", tune.RatioFall},                                   // storekit.Ratio.Learn
	{"BURST_CUT", storekit.BurstCut}, {"RATE_CUT", storekit.RateCut}, // storekit.Cut
	{"MIN_BURST_MARGIN", storekit.MinBurstMargin}, {"MIN_RATE_MARGIN", storekit.MinRateMargin},
	{"BURST_GROWTH", storekit.BurstGrowth}, {"BURST_PROBE", storekit.BurstProbe}, {"BURST_RECOVER", storekit.BurstRecover}, {"RATE_GAIN", storekit.RateGain}, // storekit.Gain
}

// A luaScript is one operation's script, with where each part begins in it,
// to name the file and line of an error Redis reports.
type luaScript struct {
	*goredis.Script
	parts []part
}

type part struct {
	file  string
	first int // the script's line the file's first line is
}

// The operations' scripts, with the parts each is made of, in order.
var (
	reserveScript  = compose("reserve", "calibration", "recover", "gates", "line", "tickets", "upkeep")
	settleScript   = compose("settle", "calibration", "recover", "gates", "line", "tickets", "upkeep")
	cancelScript   = compose("cancel", "recover", "gates", "line", "tickets", "upkeep")
	renewScript    = compose("renew", "recover", "line", "tickets", "upkeep")
	pauseScript    = compose("pause", "recover", "gates", "line", "upkeep")
	observeScript  = compose("observe", "recover", "line", "upkeep")
	snapshotScript = compose("snapshot", "calibration", "recover", "line")
)

// compose builds op's script: common.lua, the shared parts named, then
// op's own file, each with its constants written in, and without the
// functions op never calls (reachable).
func compose(op string, shared ...string) *luaScript {
	var b strings.Builder
	s := &luaScript{}
	for _, name := range append(append([]string{"common"}, shared...), op) {
		src, err := luaFiles.ReadFile("lua/" + name + ".lua")
		if err != nil {
			panic("redis: missing script part " + name + ": " + err.Error()) // embedded: a build without it cannot run
		}
		s.parts = append(s.parts, part{file: name + ".lua", first: strings.Count(b.String(), "\n") + 1})
		b.WriteString(withConstants(string(src)))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	s.Script = goredis.NewScript(reachable(b.String()))
	return s
}

// field reports whether the name src[i:j] is a table's field: after a dot
// or a colon (b.S), or a key before "=" ({S = …}), where "==" compares.
func field(src string, i, j int) bool {
	if i > 0 && (src[i-1] == '.' || src[i-1] == ':') {
		return true
	}
	rest := strings.TrimLeft(src[j:], " ")
	return strings.HasPrefix(rest, "=") && !strings.HasPrefix(rest, "==")
}

// A function of a script's chunk, as the files write them: from a line
// "local function name(" to the first line "end" after it, or on one line.
var (
	luaFuncStart = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)
	luaFuncEnds  = regexp.MustCompile(`\bend$`) // on its first line
	luaName      = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	luaNoise     = regexp.MustCompile(`--[^\n]*|'(\\.|[^'\\])*'|"(\\.|[^"\\])*"`) // comments and strings
)

// reachable returns script src with the lines of every function its chunk
// defines and never calls, directly or through the functions it calls,
// left blank (so that every other line keeps its number). Redis runs the
// whole chunk on every call and each function it defines is a closure
// made anew, about 0.2 µs each with its upvalues: a Settle, say, calls
// none of the line's or the grants' functions, a dozen.
func reachable(src string) string {
	lines := strings.Split(src, "\n")
	type fn struct{ first, last int }
	funcs := make(map[string]fn)
	var outside strings.Builder // the chunk's code outside its functions
	for i := 0; i < len(lines); i++ {
		m := luaFuncStart.FindStringSubmatch(lines[i])
		if m == nil {
			outside.WriteString(lines[i] + "\n")
			continue
		}
		f := fn{first: i, last: i}
		if !luaFuncEnds.MatchString(lines[i]) {
			for f.last < len(lines)-1 && lines[f.last] != "end" {
				f.last++
			}
		}
		funcs[m[1]] = f
		i = f.last
	}
	calls := func(code string) []string {
		return luaName.FindAllString(luaNoise.ReplaceAllString(code, ""), -1)
	}
	called := make(map[string]bool)
	todo := calls(outside.String())
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		f, ok := funcs[n]
		if !ok || called[n] {
			continue
		}
		called[n] = true
		todo = append(todo, calls(strings.Join(lines[f.first:f.last+1], "\n"))...)
	}
	for n, f := range funcs {
		if !called[n] {
			for i := f.first; i <= f.last; i++ {
				lines[i] = ""
			}
		}
	}
	return strings.Join(lines, "\n")
}

// keyNames are the names the scripts give KEYS[1] to KEYS[7] (see
// common.lua's header), written in as those like the constants.
var keyNames = []string{"S", "L", "T", "Q", "N", "F", "W"}

// constantValues maps each constant's name to its Lua literal, and each
// key's name to KEYS[i].
var constantValues = func() map[string]string {
	m := make(map[string]string, len(constants)+len(keyNames))
	for _, c := range constants {
		m[c.name] = luaValue(c.value)
	}
	for i, k := range keyNames {
		m[k] = "KEYS[" + strconv.Itoa(i+1) + "]"
	}
	return m
}()

// withConstants returns Lua source src with every name of a constant or a
// key that stands in its code (not in a comment or a string, nor as a
// field: after a dot or a colon, or before "=" in a table constructor)
// replaced by its value; lines stay where they were.
func withConstants(src string) string {
	var b strings.Builder
	b.Grow(len(src))
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '-' && strings.HasPrefix(src[i:], "--"): // a comment, to the end of its line
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			b.WriteString(src[i : i+end])
			i += end
		case c == '\'' || c == '"': // a string, with its escapes
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			b.WriteString(src[i:j])
			i = j
		case c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || 'A' <= src[j] && src[j] <= 'Z' || 'a' <= src[j] && src[j] <= 'z' || '0' <= src[j] && src[j] <= '9') {
				j++
			}
			if v, ok := constantValues[src[i:j]]; ok && !field(src, i, j) {
				b.WriteString(v)
			} else {
				b.WriteString(src[i:j])
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func luaValue(v any) string {
	switch v := v.(type) {
	case string:
		return luaQuote(v)
	case float64:
		return fmtFloat(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	panic(fmt.Sprintf("redis: constant of type %T", v)) // the table above is fixed at build time
}

// luaQuote writes s as a Lua 5.1 string literal, which knows decimal
// escapes (\ddd) but not Go's \x.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c > '~' || c == '"' || c == '\\' {
			fmt.Fprintf(&b, "\\%03d", c)
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// scriptLine matches where Redis says a script failed: user_script:N, or
// f_<sha>:N on older servers.
var scriptLine = regexp.MustCompile(`(?:user_script|f_[0-9a-f]{40}):(\d+)`)

// where rewrites the script lines a Redis error names as the files and
// lines of lua/ they come from.
func (s *luaScript) where(msg string) string {
	return scriptLine.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(m[strings.LastIndexByte(m, ':')+1:])
		if err != nil {
			return m
		}
		for i := len(s.parts) - 1; i >= 0; i-- {
			if p := s.parts[i]; n >= p.first {
				return fmt.Sprintf("lua/%s:%d", p.file, n-p.first+1)
			}
		}
		return m
	})
}
