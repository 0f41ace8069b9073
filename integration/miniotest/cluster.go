package miniotest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// StartCluster starts a distributed MinIO of n nodes (one drive each,
// erasure-coded across them) as containers of the MinIO image on the
// existing Docker network networkName, under the aliases prefix1 …
// prefixN, and waits until every node serves requests. Each node is a
// Server of its own: the test reaches it at its Endpoint, containers on
// the network at its NetworkEndpoint, and can Kill and Restart it alone.
// Every container is removed, by id, in t.Cleanup. It requires Docker.
//
// With 4 nodes MinIO's default parity is EC:2: objects stay readable with
// 2 nodes up, and writable with 3 (write quorum is data+1 when parity
// equals data).
func StartCluster(t testing.TB, networkName, prefix string, n int) []*Server {
	t.Helper()
	if networkName == "" || prefix == "" || n < 2 {
		t.Fatal("miniotest: StartCluster needs a network name, an alias prefix and at least 2 nodes")
	}
	if err := dockerAvailable(t.Context()); err != nil {
		t.Fatalf("miniotest: StartCluster needs Docker: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := []string{"server", fmt.Sprintf("http://%s{1...%d}:9000/data", prefix, n),
		"--address", ":9000", "--certs-dir", "/tmp/certs", "--quiet"}
	nodes := make([]*Server, n)
	for i := range nodes {
		// The nodes wait for each other before they serve: start all of
		// them first, then wait.
		s, err := startDocker(ctx, dockerOptions{
			kind: minioKind, network: networkName, alias: fmt.Sprintf("%s%d", prefix, i+1), cmd: cmd, noWait: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		registerCleanup(t, s)
		nodes[i] = s
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range nodes {
		wg.Go(func() { errs[i] = s.waitReady(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// WaitWritable waits until the MinIO cluster s belongs to reports write
// quorum (/minio/health/cluster answers 200): a node that Restart
// brought back serves reads at once, but the cluster refuses writes
// (503 SlowDownWrite) until its nodes have reconnected.
func (s *Server) WaitWritable(t testing.TB, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/minio/health/cluster", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("miniotest: cluster of %s not writable after %v: /minio/health/cluster: %s", s.Endpoint, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
