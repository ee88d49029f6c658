package main

import (
	"io"

	"github.com/tollgate/tollgate/internal/hostport"
	"github.com/tollgate/tollgate/worker"
)

// Defaults of the command's own settings.
const (
	// defaultEmbeddedAddress is where the embedded Temporal server listens
	// when TEMPORAL_ADDRESS is empty: Temporal's usual port, on loopback.
	defaultEmbeddedAddress = "127.0.0.1:7233"
	// defaultUIAddress is where the Temporal Web UI is served beside the
	// embedded server: the port `temporal server start-dev` uses.
	defaultUIAddress = "127.0.0.1:8233"
	// defaultSimAddress is where the simulator listens: a free loopback
	// port in-process, a fixed one for `worker sim` only when set.
	defaultSimAddress = "127.0.0.1:0"
)

// config is the command's configuration: the library's worker.Config, and
// the settings of what the command itself runs beside it (the embedded
// Temporal server, its Web UI and the simulator), read from the same
// environment and command line.
type config struct {
	worker.Config
	// EmbeddedAddress (TEMPORAL_EMBEDDED_ADDRESS) is where the embedded
	// server listens when TEMPORAL_ADDRESS is empty. Default
	// defaultEmbeddedAddress; tests use "127.0.0.1:0" for a free port.
	EmbeddedAddress string
	// UIAddress (TEMPORAL_UI_ADDRESS) is where the Temporal Web UI is served
	// beside the embedded server, or "off". Default defaultUIAddress.
	UIAddress string
	// SimAddress (SIM_ADDRESS) is where the simulator listens, in-process
	// or for `worker sim`. Default defaultSimAddress.
	SimAddress string
	// SimConfig (SIM_CONFIG) is the path of a simulator profile, the YAML or
	// JSON that llmsim.LoadConfig reads, served by `worker sim` and by the
	// in-process simulator. Empty serves defaultSimConfig.
	SimConfig string
}

// loadConfig reads the command's configuration as worker.LoadConfig reads
// the library's (its errors and -h included), validates the command's own
// settings and fills in their defaults.
func loadConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	wc, err := worker.LoadConfig(args, getenv, out,
		worker.Setting{Env: "TEMPORAL_EMBEDDED_ADDRESS", Value: &c.EmbeddedAddress,
			Usage: "listen address of the embedded Temporal server, used when TEMPORAL_ADDRESS is empty (default " + defaultEmbeddedAddress + ")"},
		worker.Setting{Env: "TEMPORAL_UI_ADDRESS", Value: &c.UIAddress,
			Usage: "listen address of the Temporal Web UI beside the embedded server, or off (default " + defaultUIAddress + ")"},
		worker.Setting{Env: "SIM_ADDRESS", Value: &c.SimAddress,
			Usage: "listen address of the simulator, in-process or for sim (default " + defaultSimAddress + ")"},
		worker.Setting{Env: "SIM_CONFIG", Value: &c.SimConfig,
			Usage: "path of a simulator profile (llmsim YAML or JSON); empty serves the default profile"},
	)
	if err != nil {
		return config{}, err
	}
	c.Config = wc
	if err := c.validate(); err != nil {
		return config{}, err
	}
	return c.withDefaults(), nil
}

// simulated reports whether the command runs the simulator in-process: no
// provider API key is set.
func (c config) simulated() bool { return !c.HasProviderKey() }

// withDefaults returns c with the library's defaults and the command's
// filled in.
func (c config) withDefaults() config {
	c.Config = c.Config.WithDefaults()
	if c.EmbeddedAddress == "" {
		c.EmbeddedAddress = defaultEmbeddedAddress
	}
	if c.UIAddress == "" {
		c.UIAddress = defaultUIAddress
	}
	if c.SimAddress == "" {
		c.SimAddress = defaultSimAddress
	}
	return c
}

// validate reports a *worker.ConfigError naming the first bad setting of
// the command's own, or nil. It reads the simulator profile file.
func (c config) validate() error {
	for _, a := range []struct {
		env, v string
		offOK  bool
	}{
		{"TEMPORAL_EMBEDDED_ADDRESS", c.EmbeddedAddress, false},
		{"TEMPORAL_UI_ADDRESS", c.UIAddress, true},
		{"SIM_ADDRESS", c.SimAddress, false},
	} {
		if a.v == "" || (a.offOK && a.v == "off") {
			continue
		}
		if err := hostport.Check(a.v); err != nil {
			fix := `use e.g. "127.0.0.1:7233" ("127.0.0.1:0" for a free port)`
			if a.offOK {
				fix = `use e.g. "127.0.0.1:8233" ("0.0.0.0:8233" to be reached from other hosts), or "off"`
			}
			return &worker.ConfigError{Env: a.env, Value: a.v, Problem: "is not host:port", Fix: fix, Err: err}
		}
	}
	if c.SimConfig != "" {
		if _, err := c.simProfile(); err != nil {
			return err
		}
	}
	return nil
}
