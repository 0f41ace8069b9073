package natstest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a JetStream cluster of nats-server processes on 127.0.0.1,
// routed to each other, for streams with several replicas.
type Cluster struct {
	// Nodes are the servers; each can be killed and restarted alone.
	Nodes []*Server
	// URL lists every node's client URL, comma-separated, as nats.Connect
	// takes it: a client fails over between them.
	URL string
}

// StartCluster starts n (at least 3 for a JetStream quorum to survive a
// node) nats-server processes forming one cluster, and stops them by PID
// in t.Cleanup. It returns once JetStream answers through every node.
func StartCluster(t testing.TB, n int, opts ...Options) *Cluster {
	t.Helper()
	bin, err := BinaryPath()
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]int, n)
	routes := make([]int, n)
	for i := range n {
		if ports[i], err = freePort(); err != nil {
			t.Fatalf("natstest: choose a port: %v", err)
		}
		if routes[i], err = freePort(); err != nil {
			t.Fatalf("natstest: choose a port: %v", err)
		}
	}
	var urls []string
	for i := range n {
		urls = append(urls, fmt.Sprintf("nats-route://%s", hostPort(routes[i])))
	}
	c := &Cluster{}
	var clients []string
	for i := range n {
		dir := t.TempDir()
		cluster := fmt.Sprintf("cluster {\n  name: tidemark\n  listen: %q\n  routes: [%s]\n}\n",
			hostPort(routes[i]), strings.Join(quoteAll(urls), ", "))
		conf := configNamed(fmt.Sprintf("n%d", i+1), hostPort(ports[i]), filepath.Join(dir, "jetstream"), options(opts), cluster)
		s := startProcessConf(t, bin, dir, ports[i], conf)
		c.Nodes = append(c.Nodes, s)
		clients = append(clients, s.URL)
	}
	c.URL = strings.Join(clients, ",")
	for _, s := range c.Nodes {
		if err := s.waitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// Connect returns an authenticated connection to the cluster that fails
// over between the nodes, closed in t.Cleanup.
func (c *Cluster) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URL, nats.UserInfo(DefaultUser, DefaultPassword), nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", c.URL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection to the cluster.
func (c *Cluster) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}
