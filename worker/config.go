package worker

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/tollgate/tollgate/activities"
	"github.com/tollgate/tollgate/internal/hostport"
	"github.com/tollgate/tollgate/quota/failover"
)

// Defaults for Config's empty fields.
const (
	// DefaultTemporalAddress is the Temporal frontend dialled when
	// TEMPORAL_ADDRESS is empty: Temporal's usual port, on loopback.
	DefaultTemporalAddress = "127.0.0.1:7233"
	// DefaultNamespace is the Temporal namespace used.
	DefaultNamespace = "default"
	// DefaultTaskQueue is the task queue the worker polls.
	DefaultTaskQueue = "tollgate"
	// DefaultStoreFailure is what a Redis-backed worker does while Redis
	// cannot be reached: refuse calls with a short backoff (Temporal keeps
	// the work).
	DefaultStoreFailure = "closed"
	// DefaultMetricsAddr is where /metrics is served. Set METRICS_ADDR=off
	// to serve none.
	DefaultMetricsAddr = "127.0.0.1:9464"
	// DefaultLogLevel is the slog level of the worker's logs.
	DefaultLogLevel = "info"
)

// Config is the worker's configuration. Each field is read from the
// environment variable named in its comment and from the flag of the same
// name in lower case with dashes (TEMPORAL_ADDRESS → -temporal-address); a
// flag wins over the variable. Empty fields take the documented defaults.
// Build one with LoadConfig; Validate reports the first bad field.
type Config struct {
	// TemporalAddress (TEMPORAL_ADDRESS) is the host:port of a Temporal
	// frontend. Empty dials DefaultTemporalAddress. (cmd/worker starts an
	// embedded server when it is empty, and sets it to that server's.)
	TemporalAddress string
	// Namespace (TEMPORAL_NAMESPACE). Default DefaultNamespace.
	Namespace string
	// TaskQueue (TASK_QUEUE). Default DefaultTaskQueue.
	TaskQueue string

	// RedisURL (REDIS_URL), e.g. "redis://redis:6379/0" or, for a Redis
	// Cluster, "redis+cluster://redis-1:6379,redis-2:6379", shares budgets
	// across a fleet. Empty uses the in-process memory store.
	RedisURL string
	// StoreFailure (STORE_FAILURE) is what to do while Redis is unreachable:
	// "closed" (refuse with backoff), "open" (admit) or "local" (a memory
	// bucket holding StoreLocalShare of each limit). Default "closed".
	StoreFailure string
	// StoreLocalShare (STORE_LOCAL_SHARE) is, for "local", this replica's
	// fraction of each limit in (0, 1], e.g. 0.5 for two replicas.
	// Default 1.
	StoreLocalShare float64

	// WaitInWorkflow (WAIT_IN_WORKFLOW: true or false) makes a governed
	// call wait for its place in line on a timer in its workflow, so its
	// activity runs once (interceptor.Options.WaitInWorkflow). Keep it on
	// until the workflows started with it have finished. Default false.
	WaitInWorkflow bool

	// Policies (POLICIES) is the path of a YAML policies file (see
	// ParsePolicies), which Run loads. Empty governs nothing: calls run
	// ungoverned, with a warning. (cmd/worker uses its simulator's policies
	// when it runs one.)
	Policies string

	// OpenAIAPIKey (OPENAI_API_KEY), AnthropicAPIKey (ANTHROPIC_API_KEY)
	// and GeminiAPIKey (GEMINI_API_KEY, a Gemini API key) are the
	// providers' keys. They are never logged. A provider whose key is empty
	// is not configured: its calls fail (HasProviderKey).
	OpenAIAPIKey    string
	AnthropicAPIKey string
	GeminiAPIKey    string
	// OpenAIBaseURL (OPENAI_BASE_URL, including /v1/), AnthropicBaseURL
	// (ANTHROPIC_BASE_URL) and GeminiBaseURL (GEMINI_BASE_URL, without
	// /v1beta) point a provider elsewhere, e.g. at a standalone llmsim.
	// Empty means the provider's public API.
	OpenAIBaseURL    string
	AnthropicBaseURL string
	GeminiBaseURL    string
	// OpenAIOrganization (OPENAI_ORG_ID) and OpenAIProject
	// (OPENAI_PROJECT_ID) are sent as OpenAI-Organization and
	// OpenAI-Project, for a key that belongs to several. Empty sends none.
	OpenAIOrganization string
	OpenAIProject      string

	// MetricsAddr (METRICS_ADDR) is the listen address of the Prometheus
	// /metrics endpoint, or "off". Default DefaultMetricsAddr.
	MetricsAddr string
	// OTLPEndpoint (OTEL_EXPORTER_OTLP_ENDPOINT), e.g.
	// "http://collector:4317", sends traces over OTLP/gRPC. Empty exports no
	// traces (spans are still created, for propagation).
	OTLPEndpoint string

	// LogLevel (LOG_LEVEL): debug, info, warn or error. Default info.
	LogLevel string

	// Register, when set, registers the application's own activities and
	// workflows on the worker beside Tollgate's: an agent's tools (see
	// workflows.AgentInput.Tools), for one. Not read from the environment.
	Register func(sdkworker.Registry)
}

// setting is one Config field's environment variable and where it goes.
type setting struct {
	env     string
	usage   string
	str     *string
	float   *float64
	boolean *bool
}

func (c *Config) settings() []setting {
	return []setting{
		{env: "TEMPORAL_ADDRESS", str: &c.TemporalAddress, usage: "Temporal frontend host:port; empty starts an embedded server (cmd/worker) or dials " + DefaultTemporalAddress},
		{env: "TEMPORAL_NAMESPACE", str: &c.Namespace, usage: "Temporal namespace (default " + DefaultNamespace + ")"},
		{env: "TASK_QUEUE", str: &c.TaskQueue, usage: "task queue to poll (default " + DefaultTaskQueue + ")"},
		{env: "REDIS_URL", str: &c.RedisURL, usage: "Redis URL for budgets shared by a fleet; empty uses process memory"},
		{env: "STORE_FAILURE", str: &c.StoreFailure, usage: "while Redis is unreachable: closed, open or local (default closed)"},
		{env: "STORE_LOCAL_SHARE", float: &c.StoreLocalShare, usage: "for STORE_FAILURE=local, this replica's `share` of each limit in (0, 1] (default 1)"},
		{env: "WAIT_IN_WORKFLOW", boolean: &c.WaitInWorkflow, usage: "true: calls wait for their place in line on a timer in their workflow, their activity running once (default false)"},
		{env: "POLICIES", str: &c.Policies, usage: "path of the policies YAML file"},
		{env: "OPENAI_API_KEY", str: &c.OpenAIAPIKey, usage: "OpenAI API key (prefer the environment variable: flags show in ps)"},
		{env: "OPENAI_BASE_URL", str: &c.OpenAIBaseURL, usage: "OpenAI base URL including /v1/"},
		{env: "OPENAI_ORG_ID", str: &c.OpenAIOrganization, usage: "OpenAI organization id sent with each call, for a key in several"},
		{env: "OPENAI_PROJECT_ID", str: &c.OpenAIProject, usage: "OpenAI project id sent with each call"},
		{env: "ANTHROPIC_API_KEY", str: &c.AnthropicAPIKey, usage: "Anthropic API key (prefer the environment variable: flags show in ps)"},
		{env: "ANTHROPIC_BASE_URL", str: &c.AnthropicBaseURL, usage: "Anthropic base URL"},
		{env: "GEMINI_API_KEY", str: &c.GeminiAPIKey, usage: "Gemini API key (prefer the environment variable: flags show in ps)"},
		{env: "GEMINI_BASE_URL", str: &c.GeminiBaseURL, usage: "Gemini API base URL, without /v1beta"},
		{env: "METRICS_ADDR", str: &c.MetricsAddr, usage: "listen address of /metrics, or off (default " + DefaultMetricsAddr + ")"},
		{env: "OTEL_EXPORTER_OTLP_ENDPOINT", str: &c.OTLPEndpoint, usage: "OTLP/gRPC endpoint for traces, e.g. http://collector:4317"},
		{env: "LOG_LEVEL", str: &c.LogLevel, usage: "debug, info, warn or error (default info)"},
	}
}

// Setting is one more string setting for LoadConfig to read beside Config's
// own, for an application built on this package (cmd/worker reads where its
// embedded server and simulator listen so): from the environment variable
// Env and the flag of the same name in lower case with dashes, the flag
// winning, listed by -h with the rest. The application validates the value
// (a *ConfigError naming Env says what is wrong in the same form).
type Setting struct {
	// Env is the environment variable, e.g. "SIM_ADDRESS". It must not be
	// one of Config's.
	Env string
	// Usage is the flag's help text.
	Usage string
	// Value receives the value in force: the flag's, else the variable's
	// (empty when neither is set).
	Value *string
}

// flagName returns the flag that sets the environment variable env:
// TEMPORAL_ADDRESS → temporal-address.
func flagName(env string) string {
	return strings.ToLower(strings.ReplaceAll(env, "_", "-"))
}

// ConfigError reports one bad Config field, or a command line that does not
// parse: the variable (and flag) that set it, the value, what is wrong and
// how to fix it. Secrets print as "(redacted)".
type ConfigError struct {
	// Env is the environment variable, e.g. "STORE_FAILURE". It is empty
	// for a command-line error that no variable names: an unknown flag
	// (Flag) or a stray argument (Value).
	Env string
	// Flag is the unknown flag as given, without its dash, when Env is
	// empty.
	Flag    string
	Value   string
	Problem string
	Fix     string
	// Err is the underlying error, if any.
	Err error
}

// Error returns e.g. `worker: STORE_FAILURE (-store-failure) "shut" is not a
// failure policy: use closed, open or local`, `worker: -task-queu is not a
// flag: …` or `worker: argument "extra" is not a flag: …`.
func (e *ConfigError) Error() string {
	switch {
	case e.Env != "":
		return fmt.Sprintf("worker: %s (-%s) %q %s: %s", e.Env, flagName(e.Env), e.Value, e.Problem, e.Fix)
	case e.Flag != "":
		return fmt.Sprintf("worker: -%s %s: %s", e.Flag, e.Problem, e.Fix)
	}
	return fmt.Sprintf("worker: argument %q %s: %s", e.Value, e.Problem, e.Fix)
}

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadConfig reads a Config, and the extra settings, from getenv (os.Getenv
// in production) and from args (the command line without the program and
// subcommand). A flag wins over its variable, even over a variable whose
// value is bad: only the value in force is parsed. It returns flag.ErrHelp
// after printing the flags to out for -h, a *ConfigError for a command line
// that does not parse or a value that is not a number, and Validate's error
// for a bad field. It prints nothing else and starts nothing. It panics if
// an extra setting repeats a variable (a programmer error).
func LoadConfig(args []string, getenv func(string) string, out io.Writer, extra ...Setting) (Config, error) {
	var c Config
	settings := c.settings()
	for _, e := range extra {
		settings = append(settings, setting{env: e.Env, usage: e.Usage, str: e.Value})
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a parse error comes back as one *ConfigError
	fs.Usage = func() {}
	given := make([]string, len(settings))
	envOf := make(map[string]string, len(settings))
	for i, s := range settings {
		// No default: -h must not print the environment's values (keys).
		fs.StringVar(&given[i], flagName(s.env), "", s.usage+" ["+s.env+"]")
		envOf[flagName(s.env)] = s.env
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(out, "flags (each also read from the environment variable in brackets; a flag wins):")
			fs.SetOutput(out)
			fs.PrintDefaults()
			return Config{}, err
		}
		return Config{}, flagError(err, fs, envOf)
	}
	if fs.NArg() > 0 {
		return Config{}, &ConfigError{Value: fs.Arg(0), Problem: "is not a flag",
			Fix: "the subcommand comes first and flags follow, e.g. `worker status -redis-url redis://localhost:6379/0` (run with -h for the flags)"}
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for i, s := range settings {
		v := getenv(s.env)
		if set[flagName(s.env)] {
			v = given[i]
		}
		if s.str != nil {
			*s.str = v
			continue
		}
		if v == "" {
			continue
		}
		if s.boolean != nil {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, &ConfigError{Env: s.env, Value: v, Problem: "is not true or false", Fix: "use true or false", Err: err}
			}
			*s.boolean = b
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return Config{}, &ConfigError{Env: s.env, Value: v, Problem: "is not a number", Fix: "use a decimal such as 0.5", Err: err}
		}
		*s.float = f
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c.WithDefaults(), nil
}

// flagError turns the flag package's parse error into one *ConfigError. Its
// messages are matched by their fixed prefixes; every flag here takes a
// value, so these are the errors Parse can return.
func flagError(err error, fs *flag.FlagSet, envOf map[string]string) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		fix := "run with -h for the flags"
		if near := nearestFlag(fs, name); near != "" {
			fix = "did you mean -" + near + "? " + fix
		}
		return &ConfigError{Flag: name, Problem: "is not a flag", Fix: fix, Err: err}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok && envOf[name] != "" {
		return &ConfigError{Env: envOf[name], Problem: "has no value after the flag",
			Fix: "give one: -" + name + " VALUE or -" + name + "=VALUE", Err: err}
	}
	if arg, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok {
		return &ConfigError{Value: arg, Problem: "is not a flag", Fix: "write flags as -name VALUE or -name=VALUE (run with -h for the flags)", Err: err}
	}
	return &ConfigError{Value: strings.Join(fs.Args(), " "), Problem: "does not parse (" + msg + ")", Fix: "run with -h for the flags", Err: err}
}

// nearestFlag returns the defined flag closest to name by edit distance, if
// it is within two edits: the flag a typo meant.
func nearestFlag(fs *flag.FlagSet, name string) string {
	best, bestDist := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestDist {
			best, bestDist = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// WithDefaults returns c with its empty fields set to the defaults.
func (c Config) WithDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Namespace, DefaultNamespace)
	def(&c.TaskQueue, DefaultTaskQueue)
	def(&c.StoreFailure, DefaultStoreFailure)
	def(&c.MetricsAddr, DefaultMetricsAddr)
	def(&c.LogLevel, DefaultLogLevel)
	if c.StoreLocalShare == 0 {
		c.StoreLocalShare = 1
	}
	return c
}

// HasProviderKey reports whether any provider's API key is set. With none,
// every governed call would fail: cmd/worker then runs its simulator and
// points the providers at it.
func (c Config) HasProviderKey() bool {
	return c.OpenAIAPIKey != "" || c.AnthropicAPIKey != "" || c.GeminiAPIKey != ""
}

// Validate reports a *ConfigError naming the first bad field of c, or nil. It
// checks the form of every field and reads the policies file; it contacts
// nothing.
func (c Config) Validate() error {
	if c.TemporalAddress != "" {
		if err := hostport.Check(c.TemporalAddress); err != nil {
			return &ConfigError{Env: "TEMPORAL_ADDRESS", Value: c.TemporalAddress, Problem: "is not host:port", Fix: `use e.g. "127.0.0.1:7233"`, Err: err}
		}
	}
	if c.MetricsAddr != "" && c.MetricsAddr != "off" {
		if err := hostport.Check(c.MetricsAddr); err != nil {
			return &ConfigError{Env: "METRICS_ADDR", Value: c.MetricsAddr, Problem: "is not host:port", Fix: `use e.g. ":9464" or "off"`, Err: err}
		}
	}
	for _, n := range []struct{ env, v string }{{"TEMPORAL_NAMESPACE", c.Namespace}, {"TASK_QUEUE", c.TaskQueue}} {
		if strings.TrimSpace(n.v) != n.v {
			return &ConfigError{Env: n.env, Value: n.v, Problem: "has leading or trailing spaces", Fix: "remove them"}
		}
	}
	if c.RedisURL != "" {
		if _, err := parseRedisURL(c.RedisURL); err != nil {
			return err
		}
	}
	if c.StoreFailure != "" {
		if _, err := failover.ParseMode(c.StoreFailure); err != nil {
			return &ConfigError{Env: "STORE_FAILURE", Value: c.StoreFailure, Problem: "is not a failure policy", Fix: "use closed, open or local", Err: err}
		}
	}
	if s := c.StoreLocalShare; s != 0 && !(s > 0 && s <= 1) {
		return &ConfigError{Env: "STORE_LOCAL_SHARE", Value: strconv.FormatFloat(s, 'g', -1, 64), Problem: "must be in (0, 1]",
			Fix: "use this replica's share of the fleet, e.g. 0.5 for two replicas"}
	}
	if c.StoreLocalShare != 0 && c.StoreLocalShare != 1 && c.StoreFailure != "local" {
		return &ConfigError{Env: "STORE_LOCAL_SHARE", Value: strconv.FormatFloat(c.StoreLocalShare, 'g', -1, 64), Problem: "is set but STORE_FAILURE is not local",
			Fix: "set STORE_FAILURE=local, or unset STORE_LOCAL_SHARE"}
	}
	if c.StoreFailure != "" && c.RedisURL == "" && c.StoreFailure != DefaultStoreFailure {
		return &ConfigError{Env: "STORE_FAILURE", Value: c.StoreFailure, Problem: "is set but REDIS_URL is empty",
			Fix: "set REDIS_URL (the memory store cannot fail), or unset STORE_FAILURE"}
	}
	for _, u := range []struct{ env, v, example string }{
		{"OPENAI_BASE_URL", c.OpenAIBaseURL, activities.DefaultOpenAIBaseURL},
		{"ANTHROPIC_BASE_URL", c.AnthropicBaseURL, activities.DefaultAnthropicBaseURL},
		{"GEMINI_BASE_URL", c.GeminiBaseURL, activities.DefaultGeminiBaseURL},
	} {
		if u.v == "" {
			continue
		}
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return &ConfigError{Env: u.env, Value: u.v, Problem: "is not an http(s) URL", Fix: `use e.g. "` + u.example + `", or leave it empty`, Err: err}
		}
	}
	for _, k := range []struct{ key, url, keyEnv, urlEnv string }{
		{c.OpenAIAPIKey, c.OpenAIBaseURL, "OPENAI_API_KEY", "OPENAI_BASE_URL"},
		{c.AnthropicAPIKey, c.AnthropicBaseURL, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"},
		{c.GeminiAPIKey, c.GeminiBaseURL, "GEMINI_API_KEY", "GEMINI_BASE_URL"},
	} {
		if k.key == "" && k.url != "" {
			return &ConfigError{Env: k.keyEnv, Value: "", Problem: "is empty but " + k.urlEnv + " is set",
				Fix: "set the key for that endpoint (any non-empty key for a standalone llmsim), or unset " + k.urlEnv}
		}
		if k.key != "" && strings.TrimSpace(k.key) != k.key {
			return &ConfigError{Env: k.keyEnv, Value: "(redacted)", Problem: "has leading or trailing spaces", Fix: "remove them (a copy-paste slip?)"}
		}
	}
	for _, id := range []struct{ env, v string }{{"OPENAI_ORG_ID", c.OpenAIOrganization}, {"OPENAI_PROJECT_ID", c.OpenAIProject}} {
		switch {
		case id.v == "":
		case c.OpenAIAPIKey == "":
			return &ConfigError{Env: id.env, Value: id.v, Problem: "is set but OPENAI_API_KEY is empty",
				Fix: "set OPENAI_API_KEY for the real API, or unset " + id.env + " (the simulator takes no organization or project)"}
		case strings.TrimSpace(id.v) != id.v || strings.ContainsFunc(id.v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return &ConfigError{Env: id.env, Value: id.v, Problem: "has spaces at its ends or control characters",
				Fix: "set the bare id, e.g. org-… or proj_…"}
		}
	}
	if c.OTLPEndpoint != "" {
		p, err := url.Parse(c.OTLPEndpoint)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return &ConfigError{Env: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: c.OTLPEndpoint, Problem: "is not an http(s) URL",
				Fix: `use the collector's OTLP/gRPC endpoint, e.g. "http://otel-collector:4317"`, Err: err}
		}
	}
	if c.LogLevel != "" {
		if _, err := parseLevel(c.LogLevel); err != nil {
			return &ConfigError{Env: "LOG_LEVEL", Value: c.LogLevel, Problem: "is not a log level", Fix: "use debug, info, warn or error", Err: err}
		}
	}
	if c.Policies != "" {
		if _, err := LoadPolicies(c.Policies); err != nil {
			return &ConfigError{Env: "POLICIES", Value: c.Policies, Problem: "cannot be used", Fix: oneLine(err.Error()), Err: err}
		}
	}
	return nil
}

// oneLine joins a multi-line message (the YAML decoder's lists one problem
// a line) into one line, as every configuration error is printed.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// redactURL hides a URL's password.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}
