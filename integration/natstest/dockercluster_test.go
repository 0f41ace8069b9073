package natstest_test

import (
	"context"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/tidemark-io/tidemark/integration/natstest"
)

// TestDockerCluster: three containers form one JetStream cluster; a
// stream with 3 replicas keeps taking messages, and keeps those it had,
// when the node leading it is killed.
func TestDockerCluster(t *testing.T) {
	if err := natstest.DockerAvailable(t.Context()); err != nil {
		t.Skipf("SKIPPED LOUDLY: no Docker daemon answers (%v); the nats-server cluster in containers is NOT tested here", err)
	}
	nw, err := network.New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := nw.Remove(ctx); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove network %s: %v", nw.ID, err)
		}
	})
	c := natstest.StartDockerCluster(t, nw.Name, 3)
	if len(c.Nodes) != 3 || c.NetworkURL != "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222" {
		t.Fatalf("cluster of %d nodes, network URL %q", len(c.Nodes), c.NetworkURL)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	js := c.JetStream(t)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "probe", Subjects: []string{"probe.>"}, Storage: jetstream.FileStorage, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "probe.a", []byte("before")); err != nil {
		t.Fatal(err)
	}
	leader := st.CachedInfo().Cluster.Leader
	killed := false
	for i, name := range c.Names {
		if name == leader {
			c.Nodes[i].Kill(t)
			killed = true
		}
	}
	if !killed {
		t.Fatalf("the stream's leader %q is none of %v", leader, c.Names)
	}
	// A new leader is elected within seconds; until then publishes fail.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Publish(pctx, "probe.a", []byte("after"))
		pcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no publish after the leader %s was killed: %v", leader, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || info.Cluster.Leader == leader {
		t.Fatalf("after killing %s: %d messages, leader %q; want 2 and another leader", leader, info.State.Msgs, info.Cluster.Leader)
	}
}
