package integration

// The job on a distributed MinIO: four nodes with one drive each,
// erasure-coded EC:2 (MinIO's default for four drives: readable with two
// nodes, writable with three).

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// TestJobOnMinIOClusterSurvivesANodeFailsClosedBelowQuorumAndResumesExactlyOnce:
// the demo job checkpoints into a 4-node cluster through node 1.
//
//   - Node 4 is killed while a checkpoint is in flight (prepared, not yet
//     completed): checkpoints go on completing on three nodes.
//   - Node 3 is killed too, below write quorum: no checkpoint completes;
//     the job's save fails within the store's operation timeout with an
//     error that says it timed out (MinIO holds the writes open rather
//     than refusing them, see below) and the job stops; the probe fails
//     (a cluster that cannot enforce conditional writes must not look
//     healthy); the latest completed checkpoint still verifies from two
//     nodes, so nothing completed is lost.
//   - Nodes 3 and 4 return, and a fresh job node resumes from a
//     checkpoint no older than the last completed one and finishes
//     exactly once.
//
// Throughout, _latest-completed, sampled every 50ms, never moves back.
func TestJobOnMinIOClusterSurvivesANodeFailsClosedBelowQuorumAndResumesExactlyOnce(t *testing.T) {
	requireDocker(t)
	nw, _ := newJobNetwork(t, false)
	start := time.Now()
	nodes := miniotest.StartCluster(t, nw.Name, "minio", 4)
	t.Logf("4-node cluster up in %v", time.Since(start).Round(time.Millisecond))
	entry := nodes[0] // the node the job and the test talk to; never killed
	bucket := entry.NewBucket(t)
	bs := openBucket(t, entry, bucket)
	if err := bs.Probe(t.Context()); err != nil {
		t.Fatalf("probe on the healthy cluster: %v", err)
	}
	env := s3Env(entry.AccessKey, entry.SecretKey)
	store := jobStoreURL(bucket, entry.NetworkEndpoint)
	const records = 12000 // the first node gets through a third before it is stopped
	args := demoArgs(store, records, "25ms")

	stopSampling := samplePointer(t, bs)

	first := startNode(t, nodeSpec{name: "node-1", net: nw, env: env, args: args})
	waitForPointer(t, bs, first, time.Minute, "first completed checkpoint",
		func(p jobPointer) bool { return p.ID != "" })

	// Kill node 4 while a checkpoint is in flight: _latest names a
	// prepared checkpoint that _latest-completed does not yet.
	inFlight := waitInFlight(t, bs, 10*time.Second)
	nodes[3].Kill(t)
	atKill, _, err := readCompletedPointer(t.Context(), bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node 4 killed at %v (checkpoint in flight: %q, completed %s)", time.Since(start).Round(time.Millisecond), inFlight, atKill.ID)
	afterOne := waitForPointer(t, bs, first, time.Minute, "two more completed checkpoints on 3 of 4 nodes",
		func(p jobPointer) bool { return p.seq(t) >= atKill.seq(t)+2 })
	t.Logf("checkpoints go on with one node down: %s completed at %v", afterOne.ID, time.Since(start).Round(time.Millisecond))

	// Below write quorum. MinIO does not refuse the job's writes: it
	// holds each PUT open while it waits for a write lock its quorum of
	// lockers cannot grant (up to its 10-minute operation timeout). The
	// store's deadlines end that: each attempt waits AttemptTimeout for
	// the response headers, and the request fails with ErrTimeout when
	// the operation timeout runs out (the demo's is 45 s: it rides
	// through 30 s outages). The save fails, the job stops with that
	// error, and it fails closed: no checkpoint completes, the pointer
	// stays, and what was completed is intact.
	nodes[2].Kill(t)
	killed := time.Now()
	t.Logf("node 3 killed at %v", time.Since(start).Round(time.Millisecond))
	before, _, err := readCompletedPointer(t.Context(), bs)
	if err != nil {
		t.Fatalf("pointer below write quorum: %v", err)
	}
	// The job's next checkpoint starts within an interval; its first
	// held request fails after the operation timeout, and aborting the
	// checkpoint's sink transaction (a write too) takes another before
	// the job stops (seen: 1m30s). Plus an attempt timeout and slack for
	// a loaded machine.
	const demoOperationTimeout, attemptTimeout = 45 * time.Second, 10 * time.Second
	code := first.wait(2*demoOperationTimeout + attemptTimeout + time.Minute)
	stoppedAfter := time.Since(killed)
	out := first.logs()
	if code == 0 || strings.Contains(out, "exactly-once") {
		t.Fatalf("node-1 finished below write quorum (exit code %d):\n%s", code, out)
	}
	if !strings.Contains(out, "s3store: timed out") {
		t.Fatalf("node-1 stopped below write quorum (exit code %d) without saying the store timed out:\n%s", code, out)
	}
	if stoppedAfter < demoOperationTimeout-5*time.Second {
		t.Errorf("node-1 stopped %v after the quorum was lost, before the operation timeout (%v) could run out:\n%s", stoppedAfter.Round(time.Millisecond), demoOperationTimeout, out)
	}
	t.Logf("node-1 stopped %v after the quorum was lost (exit code %d): %s", stoppedAfter.Round(time.Millisecond), code, lastLine(out))
	// The probe, with a deadline, must not pass (MinIO has shipped
	// releases that let conditional writes through without quorum).
	pctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	perr := bs.Probe(pctx)
	cancel()
	if perr == nil {
		t.Error("probe passes on a cluster below write quorum")
	} else {
		t.Logf("probe below write quorum: %v", perr)
	}
	done, ok, err := readCompletedPointer(t.Context(), bs)
	if err != nil || !ok {
		t.Fatalf("pointer below write quorum: %+v %v %v", done, ok, err)
	}
	if done != before {
		t.Fatalf("a checkpoint completed below write quorum: pointer %+v, then %+v", before, done)
	}
	t.Logf("probe done at %v", time.Since(start).Round(time.Millisecond))
	job, err := blobstore.WithPrefix(bs, jobPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := blobstorage.New(job, "", blobstorage.Options{}).Verify(t.Context(), done.ID); err != nil {
		t.Fatalf("latest completed %s does not verify from two nodes: %v", done.ID, err)
	}
	t.Logf("below quorum checked at %v", time.Since(start).Round(time.Millisecond))

	nodes[2].Restart(t)
	nodes[3].Restart(t)
	entry.WaitWritable(t, time.Minute)
	// Single-part writes work as soon as the cluster reports write
	// quorum; UploadPart may still be refused with 503 SlowDownWrite for
	// several seconds after (seen: up to 14s, beyond the store's five
	// attempts), so the probe is retried.
	back := time.Now()
	for attempt := 1; ; attempt++ {
		err := bs.Probe(t.Context())
		if err == nil {
			t.Logf("probe passes %v after the nodes returned (attempt %d)", time.Since(back).Round(time.Millisecond), attempt)
			break
		}
		if time.Since(back) > time.Minute {
			t.Fatalf("probe after the nodes returned, for %v: %v", time.Since(back).Round(time.Second), err)
		}
		t.Logf("probe after the nodes returned: %v", err)
		time.Sleep(time.Second)
	}
	second := startNode(t, nodeSpec{name: "node-2", net: nw, env: env, args: args})
	if code := second.wait(3 * time.Minute); code != 0 {
		t.Fatalf("node-2 exit code %d, want 0:\n%s", code, second.logs())
	}
	out2 := second.logs()
	id, action, offset := resumedFrom(t, out2)
	if id < done.ID {
		t.Fatalf("node-2 resumed from %s, older than the latest completed %s:\n%s", id, done.ID, out2)
	}
	exactlyOnceOK(t, "node-2", out2, records)
	t.Logf("node-2 resumed from %s (%s) at record %d and finished exactly once at %v", id, action, offset, time.Since(start).Round(time.Millisecond))

	h := stopSampling()
	for i := 1; i < len(h); i++ {
		if h[i].ID < h[i-1].ID || h[i].Epoch < h[i-1].Epoch {
			t.Errorf("pointer regressed: %+v after %+v (history %+v)", h[i], h[i-1], h)
		}
	}
	t.Logf("pointer history: %d states, %+v ... %+v", len(h), h[0], h[len(h)-1])
}

// samplePointer reads the job's _latest-completed every 50ms until the
// returned function is called, which returns the distinct values seen in
// order. Read errors are expected while the cluster is below quorum and
// are not recorded.
func samplePointer(t *testing.T, bs blobstore.Blobstore) func() []jobPointer {
	var (
		mu      sync.Mutex
		samples []jobPointer
	)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			p, ok, err := readCompletedPointer(ctx, bs)
			cancel()
			mu.Lock()
			if err == nil && ok && (len(samples) == 0 || samples[len(samples)-1] != p) {
				samples = append(samples, p)
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); <-stopped }
	t.Cleanup(halt)
	return func() []jobPointer {
		halt()
		mu.Lock()
		defer mu.Unlock()
		if len(samples) == 0 {
			t.Fatal("no pointer sampled")
		}
		return samples
	}
}

// waitInFlight polls the job's pointers until _latest names a checkpoint
// _latest-completed does not (one prepared, its completion pending) and
// returns its id; after timeout it returns "" (the kill then lands at a
// random point of the job's checkpoint cycle, which the test logs).
func waitInFlight(t *testing.T, bs blobstore.Blobstore, timeout time.Duration) string {
	t.Helper()
	read := func(name string) string {
		rc, err := bs.Get(t.Context(), jobPrefix+"/"+name)
		if err != nil {
			if !errors.Is(err, blobstore.ErrNotFound) {
				t.Fatalf("read %s: %v", name, err)
			}
			return ""
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		var p jobPointer
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p.ID
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if latest, done := read("_latest"), read("_latest-completed"); latest > done {
			return latest
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ""
}
