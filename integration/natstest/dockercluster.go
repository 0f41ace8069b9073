package natstest

import (
	"fmt"
	"strings"
	"testing"
)

// clusterPort is the route port of the nodes of a cluster in containers.
const clusterPort = 6222

// DockerCluster is a JetStream cluster of nats-server containers on a
// user-defined Docker network. The test reaches the nodes through Cluster
// (ports bound on 127.0.0.1); containers on the network use NetworkURL.
type DockerCluster struct {
	Cluster
	// Names are the nodes' server names and network aliases, in order.
	Names []string
	// NetworkURL lists every node's client URL on the network,
	// comma-separated, for a client in a container to fail over.
	NetworkURL string
}

// StartDockerCluster starts n nats-server containers of the FROM scratch
// image on Docker network networkName, routed to each other by their
// aliases ("nats-1", …), each client port also bound to a free port of
// 127.0.0.1. It removes every container by id in t.Cleanup and returns
// once JetStream answers through every node. It fails the test when no
// Docker daemon answers.
func StartDockerCluster(t testing.TB, networkName string, n int, opts ...Options) *DockerCluster {
	t.Helper()
	ctx := t.Context()
	cli, img := dockerImage(t)
	c := &DockerCluster{}
	var routes, inside []string
	for i := range n {
		name := fmt.Sprintf("nats-%d", i+1)
		c.Names = append(c.Names, name)
		routes = append(routes, fmt.Sprintf("nats-route://%s:%d", name, clusterPort))
		inside = append(inside, fmt.Sprintf("nats://%s:4222", name))
	}
	var hosts []string
	for _, name := range c.Names {
		cluster := fmt.Sprintf("cluster {\n  name: tidemark\n  listen: \"0.0.0.0:%d\"\n  routes: [%s]\n}\n",
			clusterPort, strings.Join(quoteAll(routes), ", "))
		conf := configNamed(name, "0.0.0.0:4222", "/data", options(opts), cluster)
		var s *Server
		for attempt := 0; ; attempt++ {
			port, err := freePort()
			if err != nil {
				t.Fatalf("natstest: choose a port: %v", err)
			}
			s, err = startContainer(ctx, cli, img, port, conf, networkName, name)
			if err == nil {
				break
			}
			if attempt == 2 || !strings.Contains(err.Error(), "port is already allocated") && !strings.Contains(err.Error(), "address already in use") {
				t.Fatal(err)
			}
		}
		registerCleanup(t, s)
		c.Nodes = append(c.Nodes, s)
		hosts = append(hosts, s.URL)
	}
	c.URL = strings.Join(hosts, ",")
	c.NetworkURL = strings.Join(inside, ",")
	for _, s := range c.Nodes {
		if err := s.waitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return c
}
