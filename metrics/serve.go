package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Path is where Server serves the metrics.
const Path = "/metrics"

// shutdownTimeout bounds how long Close waits for scrapes in progress.
const shutdownTimeout = 5 * time.Second

// Handler returns an http.Handler that serves g's metrics in the
// Prometheus exposition formats (promhttp.HandlerFor).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// Server serves metrics over HTTP at Path. Start one with Start.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	once sync.Once
	done chan struct{} // closed when Serve has returned
	err  error         // Serve's error, other than http.ErrServerClosed; read after done
	stop chan struct{} // closed by Close, ends the ctx watcher
	cerr error         // Close's result
}

// Start listens on addr (host:port; ":0" picks a free port) and serves g's
// metrics at Path until ctx is cancelled or Close is called. It returns
// once the address is bound, so that a port already in use is reported
// here rather than lost in a goroutine.
//
// A CLI with a --metrics-addr flag needs only:
//
//	srv, err := metrics.Start(ctx, addr, reg)
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
func Start(ctx context.Context, addr string, g prometheus.Gatherer) (*Server, error) {
	if g == nil {
		return nil, errors.New("metrics: Start: nil Gatherer")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err) // names the address
	}
	mux := http.NewServeMux()
	mux.Handle(Path, Handler(g))
	s := &Server{
		ln: ln,
		srv: &http.Server{
			Handler: mux,
			// A scraper that never finishes its headers must not hold a
			// connection open forever.
			ReadHeaderTimeout: 10 * time.Second,
		},
		done: make(chan struct{}),
		stop: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.stop:
		}
	}()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// URL returns the URL of the metrics, with localhost in place of an
// unspecified listening address (":9464" listens on every address).
func (s *Server) URL() string {
	host, port, err := net.SplitHostPort(s.ln.Addr().String())
	if err != nil {
		return "http://" + s.ln.Addr().String() + Path
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + Path
}

// Close stops the server: it stops accepting connections, waits up to 5 s
// for scrapes in progress, and returns once the server has stopped, with
// the error that stopped it early, if any. Calling it again returns the
// same result.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.stop)
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		err := s.srv.Shutdown(ctx)
		if err != nil {
			// Scrapes outlived the timeout: cut them off.
			err = errors.Join(err, s.srv.Close())
		}
		<-s.done
		s.cerr = errors.Join(s.err, err)
		if s.cerr != nil {
			s.cerr = fmt.Errorf("metrics: serve on %s: %w", s.ln.Addr(), s.cerr)
		}
	})
	return s.cerr
}
