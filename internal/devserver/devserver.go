// Package devserver runs a real Temporal server inside the process: SQLite in
// memory, started in about a second. It backs the worker's embedded default
// (no TEMPORAL_ADDRESS), the demo, the benchmarks and every end-to-end test.
// It is the only package that imports go.temporal.io/server.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/temporal"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TimerPrecision is how late the embedded server may fire a timer, such as
// an activity retry scheduled by NextRetryDelay (the server's
// history.timerProcessorMaxTimeShift; a production server's default is 1 s,
// so there a sub-second retry delay takes about a second).
const TimerPrecision = 50 * time.Millisecond

// Options configure Start. The zero value starts a server on a free loopback
// port with the namespace "default".
type Options struct {
	// Address, when set (e.g. "127.0.0.1:7233"), is where the server can be
	// reached. Empty means a free loopback port.
	Address string
	// Namespace is registered at start. Default "default".
	Namespace string
}

// Server is a running embedded Temporal server. Stop it when done.
type Server struct {
	ts        *temporaltest.TestServer
	namespace string
	address   string
	proxy     net.Listener
	wg        sync.WaitGroup
}

// Start starts a server. It returns an error if the server cannot start or
// Options.Address cannot be listened on (for example, another Temporal server
// already holds port 7233).
func Start(opts Options) (s *Server, err error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	var proxy net.Listener
	if opts.Address != "" {
		// Listen first so a taken port fails before the server starts.
		proxy, err = net.Listen("tcp", opts.Address)
		if err != nil {
			return nil, fmt.Errorf("devserver: listen on %s: %w (set TEMPORAL_ADDRESS to use a running server, or free the port)", opts.Address, err)
		}
	}
	defer func() {
		// temporaltest reports start failures by panicking when no *testing.T is given.
		if r := recover(); r != nil {
			if proxy != nil {
				proxy.Close()
			}
			s, err = nil, fmt.Errorf("devserver: start: %v", r)
		}
	}()
	ts := temporaltest.NewServer(temporaltest.WithBaseServerOptions(temporal.WithDynamicConfigClient(dynamicconfig.StaticClient{
		// temporaltest's own setting, which this client replaces.
		dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key(): []dynamicconfig.ConstrainedValue{{Value: true}},
		// Timers (activity retries among them) fire up to this late; the
		// default of 1 s would round every sub-second NextRetryDelay up
		// to about a second.
		dynamicconfig.TimerProcessorMaxTimeShift.Key(): []dynamicconfig.ConstrainedValue{{Value: TimerPrecision}},
	})))
	s = &Server{ts: ts, namespace: opts.Namespace, address: ts.GetFrontendHostPort(), proxy: proxy}
	if err := s.registerNamespace(); err != nil {
		s.Stop()
		return nil, err
	}
	if proxy != nil {
		s.address = proxy.Addr().String()
		s.wg.Add(1)
		go s.serveProxy(ts.GetFrontendHostPort())
	}
	return s, nil
}

// Address returns the host:port clients dial.
func (s *Server) Address() string { return s.address }

// Namespace returns the namespace registered at start.
func (s *Server) Namespace() string { return s.namespace }

// Dial returns a client of the server's namespace with opts (HostPort and an
// empty Namespace are filled in). The caller closes it.
func (s *Server) Dial(opts client.Options) (client.Client, error) {
	opts.HostPort = s.address
	if opts.Namespace == "" {
		opts.Namespace = s.namespace
	}
	return client.Dial(opts)
}

// Stop shuts the server down.
func (s *Server) Stop() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	s.ts.Stop()
	s.wg.Wait()
}

func (s *Server) registerNamespace() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.ts.GetDefaultClient()
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        s.namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	if err != nil && !isAlreadyExists(err) {
		return fmt.Errorf("devserver: register namespace %q: %w", s.namespace, err)
	}
	// The namespace cache refreshes asynchronously; wait until it serves.
	for {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.namespace})
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("devserver: namespace %q not ready: %w", s.namespace, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isAlreadyExists(err error) bool {
	var exists *serviceerror.NamespaceAlreadyExists
	return errors.As(err, &exists)
}

// serveProxy forwards connections from the fixed address to the server's own
// port, since the embedded server always listens on a port it picks.
func (s *Server) serveProxy(backend string) {
	defer s.wg.Done()
	for {
		conn, err := s.proxy.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer conn.Close()
			up, err := net.Dial("tcp", backend)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, conn); done <- struct{}{} }()
			go func() { io.Copy(conn, up); done <- struct{}{} }()
			<-done
		}()
	}
}
