package integration

// The job on real containers: each test runs `tidemark demo` (the
// word-count job of package demo) in containers of a FROM scratch image
// built from this checkout (jobimage_test.go), against MinIO containers on
// a user-defined Docker network, and plays one part of the story in
// shared/DESIGN.md: a node that dies and a fresh one that resumes, a node
// cut off and replaced that must be fenced, a savepoint moved to another
// region.
//
// These tests need Docker. When no daemon answers they skip with a loud
// message (they are the only tests here that may); any other failure to
// start fails them.

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// The demo's pace in these tests: batches of 100 records, a checkpoint
// at least every 300ms, and a pause after each batch so that a run lasts
// a few seconds, long enough to kill or cut off mid-run, short enough for
// 2 cores.
const (
	demoBatch    = "100"
	demoInterval = "300ms"
)

// demoArgs is the command line of a job node.
func demoArgs(store string, records int, slow string, extra ...string) []string {
	return append([]string{"demo",
		"--store", store,
		"--dir", "/work/node", // empty: the container is new
		"--records", fmt.Sprint(records),
		"--batch", demoBatch,
		"--interval", demoInterval,
		"--slow", slow,
	}, extra...)
}

// TestEphemeralNodeKilledResumesOnFreshContainerExactlyOnce: a job node is
// killed with SIGKILL after two completed checkpoints; a new container,
// whose disk holds nothing of the old one, resumes from the latest
// completed checkpoint in the bucket (downloading its state), runs the
// job to the end, and the committed output holds every record exactly
// once.
func TestEphemeralNodeKilledResumesOnFreshContainerExactlyOnce(t *testing.T) {
	killedNodeResumesOnFreshContainer(t)
}

// TestEphemeralNodeKilledResumesOnFreshContainerExactlyOnceRemoteState is
// the same story with the state in the store (demo --remote-state): the
// fresh container downloads only the local part of the state, reads its
// tables from the bucket, and finishes exactly once.
func TestEphemeralNodeKilledResumesOnFreshContainerExactlyOnceRemoteState(t *testing.T) {
	killedNodeResumesOnFreshContainer(t, "--remote-state")
}

// killedNodeResumesOnFreshContainer plays the story of
// TestEphemeralNodeKilledResumesOnFreshContainerExactlyOnce with extra
// demo flags (the same on both nodes).
func killedNodeResumesOnFreshContainer(t *testing.T, extra ...string) {
	requireDocker(t)
	nw, _ := newJobNetwork(t, false)
	srv := miniotest.StartOnNetwork(t, nw.Name, "minio")
	bucket := srv.NewBucket(t)
	bs := openBucket(t, srv, bucket)
	env := s3Env(srv.AccessKey, srv.SecretKey)
	store := jobStoreURL(bucket, srv.NetworkEndpoint)
	const records = 20000 // 200 batches of 25ms: about 5s of work
	args := demoArgs(store, records, "25ms", extra...)
	remote := slices.Contains(extra, "--remote-state")

	first := startNode(t, nodeSpec{name: "node-1", net: nw, env: env, args: args})
	seen := waitForPointer(t, bs, first, time.Minute, "second completed checkpoint",
		func(p jobPointer) bool { return p.seq(t) >= 2 })
	first.kill()
	if code := first.wait(time.Minute); code != 137 {
		t.Fatalf("node-1 exit code %d after SIGKILL, want 137:\n%s", code, first.logs())
	}
	if out := first.logs(); strings.Contains(out, "exactly-once") {
		t.Fatalf("node-1 finished before it was killed (the test needs more records or a slower pace):\n%s", out)
	}
	atDeath, ok, err := readCompletedPointer(t.Context(), bs)
	if err != nil || !ok {
		t.Fatalf("pointer after the kill: %+v, %v, %v", atDeath, ok, err)
	}
	if atDeath.ID < seen.ID {
		t.Fatalf("pointer moved backwards: %s, then %s", seen.ID, atDeath.ID)
	}
	t.Logf("node-1 killed; latest completed checkpoint %s (seen %s before the kill)", atDeath.ID, seen.ID)

	second := startNode(t, nodeSpec{name: "node-2", net: nw, env: env, args: args})
	code := second.wait(2 * time.Minute)
	out := second.logs()
	if code != 0 {
		t.Fatalf("node-2 exit code %d, want 0:\n%s", code, out)
	}
	id, action, offset := resumedFrom(t, out)
	// Recovery may promote a newer prepared checkpoint whose sink
	// transaction committed; it must never go back before the pointer.
	if id < atDeath.ID {
		t.Fatalf("node-2 resumed from %s, older than the latest completed checkpoint %s:\n%s", id, atDeath.ID, out)
	}
	if offset == 0 || offset >= records {
		t.Fatalf("node-2 resumed at record %d, want within (0, %d):\n%s", offset, records, out)
	}
	exactlyOnceOK(t, "node-2", out, records)
	if remote {
		// The state was in the bucket: its tables are objects under the
		// job's remote/ prefix, and the checkpoint node-2 resumed from
		// references them (no table of it was uploaded as a file).
		objects := 0
		for info, err := range bs.List(t.Context(), jobPrefix+"/remote/") {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(info.Key, ".sst") {
				objects++
			}
		}
		if objects == 0 || !strings.Contains(out, "state in the store") {
			t.Fatalf("remote state: %d tables under %s/remote/, and node-2 said:\n%s", objects, jobPrefix, out)
		}
		for info, err := range bs.List(t.Context(), jobPrefix+"/shared/") {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(info.Key, ".sst") {
				t.Fatalf("remote state (all levels): table %s uploaded by a checkpoint", info.Key)
			}
		}
		t.Logf("%d tables in the bucket under %s/remote/", objects, jobPrefix)
	}
	t.Logf("node-2 resumed from %s (%s) at record %d and finished exactly once", id, action, offset)
}

// TestZombieNodeCutOffAndReplacedIsFencedWhenItReconnects: node A runs the
// job and completes a checkpoint; A is cut off the network (its process
// keeps running); node B starts on the same store, takes the writer role
// and completes a checkpoint of its own; A's network comes back. A must
// then be fenced (it stops with an error that says so) and never move
// the pointer again: _latest-completed, sampled throughout, never goes
// backwards and never returns to A's epoch once B's appeared. B runs the
// job to the end, exactly once.
func TestZombieNodeCutOffAndReplacedIsFencedWhenItReconnects(t *testing.T) {
	requireDocker(t)
	// A reconnects with the address it had, so that its connections
	// opened before the cut carry on, as when a real partition heals (a
	// new address would leave them hanging until TCP gives up, about 15
	// minutes). That takes a network with a subnet of its own.
	nw, subnet := newJobNetwork(t, true)
	srv := miniotest.StartOnNetwork(t, nw.Name, "minio")
	bucket := srv.NewBucket(t)
	bs := openBucket(t, srv, bucket)
	env := s3Env(srv.AccessKey, srv.SecretKey)
	// The endpoint is MinIO's address rather than its alias: cut off, A
	// cannot resolve the alias, and the SDK does not retry a failed name
	// lookup, so A would fail on the network error and never become a
	// zombie. By address, A retries (max_attempts) until the network is
	// back.
	endpoint := fmt.Sprintf("http://%s:9000", containerIP(t, srv.ContainerID(), nw))
	store := jobStoreURL(bucket, endpoint, "max_attempts=1000")
	const records = 40000 // A alone would need about 10s
	args := demoArgs(store, records, "25ms")

	// Sample the pointer until the test ends.
	var (
		mu      sync.Mutex
		samples []jobPointer
		readErr error
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			p, ok, err := readCompletedPointer(t.Context(), bs)
			mu.Lock()
			if err != nil && readErr == nil && t.Context().Err() == nil {
				readErr = err
			}
			if ok && (len(samples) == 0 || samples[len(samples)-1] != p) {
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
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); <-sampled }
	t.Cleanup(halt) // on a failure before stopSampling
	stopSampling := func() []jobPointer {
		halt()
		mu.Lock()
		defer mu.Unlock()
		if readErr != nil {
			t.Fatalf("sample pointer: %v", readErr)
		}
		return samples
	}

	ipA, ipB := pinnedIP(subnet, 200), pinnedIP(subnet, 201)
	a := startNode(t, nodeSpec{name: "node-A", net: nw, ip: ipA, env: env, args: args})
	seenA := waitForPointer(t, bs, a, time.Minute, "a checkpoint completed by A",
		func(p jobPointer) bool { return p.ID != "" })
	a.disconnect(nw)
	t.Logf("A completed %s (epoch %d) and is cut off", seenA.ID, seenA.Epoch)

	b := startNode(t, nodeSpec{name: "node-B", net: nw, ip: ipB, env: env, args: args})
	seenB := waitForPointer(t, bs, b, time.Minute, "a checkpoint completed by B",
		func(p jobPointer) bool { return p.Epoch > seenA.Epoch && p.ID > seenA.ID })
	if !a.running() {
		t.Fatalf("A stopped while cut off, before it could play the zombie:\n%s", a.logs())
	}
	a.reconnect(nw, ipA)
	t.Logf("B took over (epoch %d) and completed %s; A is back on the network", seenB.Epoch, seenB.ID)

	healed := time.Now()
	codeA := a.wait(2 * time.Minute)
	outA := a.logs()
	t.Logf("A exited %v after the network came back: %s", time.Since(healed).Round(time.Millisecond), lastLine(outA))
	codeB := b.wait(2 * time.Minute)
	outB := b.logs()
	history := stopSampling()

	// The CLI says it once, in its words (cmd/tidemark's fencedError).
	const fenced = "fenced: another process took over this store's job"
	if codeA == 0 || !strings.Contains(outA, fenced) {
		t.Errorf("A exit code %d, want non-zero with %q in its output:\n%s", codeA, fenced, outA)
	}
	if strings.Contains(outA, "exactly-once") {
		t.Errorf("A, fenced, still reached the exactly-once check:\n%s", outA)
	}
	if codeB != 0 {
		t.Fatalf("B exit code %d, want 0:\n%s", codeB, outB)
	}
	if id, _, _ := resumedFrom(t, outB); id < seenA.ID {
		t.Errorf("B resumed from %s, older than A's completed %s", id, seenA.ID)
	}
	exactlyOnceOK(t, "B", outB, records)

	// The pointer's history: forward only, and A's epoch never again
	// once B's appeared.
	if len(history) < 2 {
		t.Fatalf("pointer samples %+v: want A's and B's", history)
	}
	epochB := uint64(0)
	for i, p := range history {
		if i > 0 && (p.ID < history[i-1].ID || p.Epoch < history[i-1].Epoch) {
			t.Errorf("pointer regressed: %+v after %+v (history %+v)", p, history[i-1], history)
		}
		if p.Epoch > seenA.Epoch && epochB == 0 {
			epochB = p.Epoch
		}
		if epochB != 0 && p.Epoch != epochB {
			t.Errorf("pointer %+v after B's epoch %d appeared (history %+v)", p, epochB, history)
		}
	}
	last := history[len(history)-1]
	if last.Epoch != epochB || last.seq(t) <= seenB.seq(t) {
		t.Errorf("final pointer %+v: want B's epoch %d past %s", last, epochB, seenB.ID)
	}
	t.Logf("B finished at %s; pointer history (%d states) %+v ... %+v", last.ID, len(history), history[:min(4, len(history))], last)
}

// TestRegionSavepointCopiedToOtherRegionResumesThereExactlyOnce: the job
// runs in region east until it crashes; `tidemark savepoint create` (in a
// container, against east) archives its latest completed checkpoint,
// `tidemark savepoint cp` streams it to the bucket of region west (another
// MinIO server), `tidemark savepoint restore` makes it west's latest
// completed checkpoint, and the job started in west resumes from it and
// finishes exactly once. East is left as it was.
func TestRegionSavepointCopiedToOtherRegionResumesThereExactlyOnce(t *testing.T) {
	requireDocker(t)
	nw, _ := newJobNetwork(t, false)
	east := miniotest.StartOnNetwork(t, nw.Name, "region-east")
	west := miniotest.StartOnNetwork(t, nw.Name, "region-west")
	eastBucket, westBucket := east.NewBucket(t), west.NewBucket(t)
	eastBS, westBS := openBucket(t, east, eastBucket), openBucket(t, west, westBucket)
	// Both servers have the same root credentials; a job container gets
	// them once, through the standard AWS chain.
	if east.AccessKey != west.AccessKey || east.SecretKey != west.SecretKey {
		t.Fatal("the two MinIO servers have different credentials; the CLI takes one set from the environment")
	}
	env := s3Env(east.AccessKey, east.SecretKey)
	eastURL := jobStoreURL(eastBucket, east.NetworkEndpoint)
	westURL := jobStoreURL(westBucket, west.NetworkEndpoint)
	const records, crashAt = 20000, 9000

	// East: checkpoints every 2000 records, crash (exit 137) at 9000.
	ran := startNode(t, nodeSpec{name: "east job", net: nw, env: env,
		args: demoArgs(eastURL, records, "5ms", "--checkpoint-every", "2000", "--crash-after-records", fmt.Sprint(crashAt))})
	if code := ran.wait(2 * time.Minute); code != 137 {
		t.Fatalf("east job exit code %d, want 137 (its injected crash):\n%s", code, ran.logs())
	}
	eastPtr, ok, err := readCompletedPointer(t.Context(), eastBS)
	if err != nil || !ok {
		t.Fatalf("east pointer after the crash: %+v, %v, %v", eastPtr, ok, err)
	}

	code, out := runCLI(t, nw, env, "savepoint", "create", "v1", "--store", eastURL)
	if code != 0 {
		t.Fatalf("savepoint create: exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "created from checkpoint "+eastPtr.ID) {
		t.Fatalf("savepoint create did not archive east's latest completed checkpoint %s:\n%s", eastPtr.ID, out)
	}
	if code, out := runCLI(t, nw, env, "savepoint", "cp", "v1", eastURL, westURL); code != 0 || !strings.Contains(out, "copied and verified") {
		t.Fatalf("savepoint cp: exit %d:\n%s", code, out)
	}
	if code, out := runCLI(t, nw, env, "savepoint", "restore", "v1", "--store", westURL); code != 0 {
		t.Fatalf("savepoint restore: exit %d:\n%s", code, out)
	}
	westPtr, ok, err := readCompletedPointer(t.Context(), westBS)
	if err != nil || !ok || westPtr.ID != eastPtr.ID {
		t.Fatalf("west pointer after restore: %+v (found %v, %v), want %s", westPtr, ok, err, eastPtr.ID)
	}

	// West: the same job, no crash this time.
	resumed := startNode(t, nodeSpec{name: "west job", net: nw, env: env, args: demoArgs(westURL, records, "0")})
	code = resumed.wait(2 * time.Minute)
	out = resumed.logs()
	if code != 0 {
		t.Fatalf("west job exit code %d, want 0:\n%s", code, out)
	}
	id, _, offset := resumedFrom(t, out)
	if id != eastPtr.ID || offset == 0 || offset > crashAt {
		t.Fatalf("west job resumed from %s at record %d, want %s at a record in (0, %d]:\n%s", id, offset, eastPtr.ID, crashAt, out)
	}
	exactlyOnceOK(t, "west job", out, records)
	// West's sink holds the output from the savepoint on; the verdict
	// must say that is what it checked.
	if !strings.Contains(out, fmt.Sprintf("from record %d", offset)) {
		t.Errorf("west verdict does not say its output starts at record %d:\n%s", offset, out)
	}
	after, _, err := readCompletedPointer(t.Context(), eastBS)
	if err != nil || after != eastPtr {
		t.Errorf("east pointer changed to %+v (%v) by the run in west; was %+v", after, err, eastPtr)
	}
	t.Logf("savepoint of %s moved east → west; west resumed at record %d and finished exactly once", id, offset)
}

// lastLine returns the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}
