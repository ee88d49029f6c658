package webui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/server_options"
)

// startTimeout bounds how long Start waits for the UI to answer.
const startTimeout = 10 * time.Second

// Options configure Start.
type Options struct {
	// Address is the host:port to serve on, e.g. "127.0.0.1:8233". Port 0
	// picks a free port. Required.
	Address string
	// TemporalAddress is the host:port of the Temporal frontend whose
	// workflows the UI shows. Required.
	TemporalAddress string
	// Namespace is the namespace the UI opens on. Default "default".
	Namespace string
}

// Server is a running Web UI. Stop it when done; its methods are safe for
// concurrent use.
type Server struct {
	ui      *uiserver.Server
	url     string
	stopped chan struct{}
}

// Start serves the UI and returns once its page answers. It returns an
// error naming the address when it cannot be listened on (another UI, or a
// `temporal server start-dev`, may hold it) or the UI does not answer within
// ten seconds.
func Start(opts Options) (*Server, error) {
	if opts.Address == "" || opts.TemporalAddress == "" {
		return nil, errors.New("webui: Options.Address and Options.TemporalAddress are required")
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	host, port, err := reservePort(opts.Address)
	if err != nil {
		return nil, err
	}
	cfg := &uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: opts.TemporalAddress,
		DefaultNamespace:    opts.Namespace,
		EnableUI:            true,
		// Plain HTTP on loopback: the CSRF cookie must be sent without TLS.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
	}
	s := &Server{
		ui:      uiserver.NewServer(server_options.WithConfigProvider(cfg)),
		url:     "http://" + net.JoinHostPort(dialHost(host), strconv.Itoa(port)),
		stopped: make(chan struct{}),
	}
	go func() {
		defer close(s.stopped)
		_ = s.ui.Start() // returns once Stop closes it
	}()
	if err := s.waitReady(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// reservePort checks that addr can be listened on and returns its host and
// port, a free one for port 0. The UI server listens by itself (its Start
// takes no listener) and ends the process when it cannot, so the check comes
// first; the port stays free for the instant between the two.
func reservePort(addr string) (host string, port int, err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", 0, fmt.Errorf("webui: listen on %s: %w (free the port, or choose another address)", addr, err)
	}
	defer l.Close()
	host, _, err = net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("webui: address %q: %w", addr, err)
	}
	return host, l.Addr().(*net.TCPAddr).Port, nil
}

// dialHost returns the host a browser on this machine uses to reach a
// server listening on host: loopback for a wildcard.
func dialHost(host string) string {
	switch host {
	case "", "0.0.0.0":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return host
}

// waitReady polls the UI's health endpoint until it answers 200.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/healthz", nil)
		if err != nil {
			return fmt.Errorf("webui: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webui: %s did not answer within %s (last: %v)", s.url, startTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// URL returns the UI's root, e.g. "http://127.0.0.1:8233".
func (s *Server) URL() string { return s.url }

// Stop stops serving and waits for the server to close.
func (s *Server) Stop() {
	s.ui.Stop()
	<-s.stopped
}
