package integration

// The job with workers on real containers: `tidemark demo --workers N
// --worker-listen :PORT` in one container (the coordinator: writer role,
// source, sink) and `tidemark demo worker` in N others (the state), all
// on MinIO over a user-defined Docker network. Helpers are those of
// jobimage_test.go; every container and network is removed by id.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// workerPort is where the coordinator container listens for its workers.
const workerPort = 7070

// coordinatorArgs is the command line of the coordinator of a job with
// workers.
func coordinatorArgs(store string, records, workers int, slow string) []string {
	return []string{"demo",
		"--store", store,
		"--dir", "/work/node",
		"--records", fmt.Sprint(records),
		"--batch", demoBatch,
		"--interval", "500ms",
		"--slow", slow,
		"--workers", fmt.Sprint(workers),
		"--worker-listen", fmt.Sprintf(":%d", workerPort),
	}
}

// startWorkerContainer starts a worker container for slot, with an empty disk.
func startWorkerContainer(t *testing.T, nw *testcontainers.DockerNetwork, env map[string]string, coordinator string, slot int, name string) *jobNode {
	t.Helper()
	return startNode(t, nodeSpec{name: name, net: nw, env: env, args: []string{"demo", "worker",
		"--coordinator", coordinator, "--slot", fmt.Sprint(slot), "--dir", "/work/node"}})
}

// openedRE matches the coordinator's line about the owners a worker
// opened: slot, worker id, owners, where from.
var openedRE = regexp.MustCompile(`worker (\d+) \((slot\d+-[0-9a-f]+)\): owners ([a-z0-9,-]+), (empty|from its own disk|restored from the store)`)

// openedOwners is one line of the coordinator about the owners a worker
// opened.
type openedOwners struct {
	slot   string
	worker string
	owners string
	from   string
}

// openedLines returns the coordinator's opened-owner lines, in the order
// it logged them.
func openedLines(logs string) []openedOwners {
	var out []openedOwners
	for _, m := range openedRE.FindAllStringSubmatch(logs, -1) {
		out = append(out, openedOwners{slot: m[1], worker: m[2], owners: m[3], from: m[4]})
	}
	return out
}

// completedAssignment returns the assignment (owner → worker id) of the
// job's latest completed checkpoint.
func completedAssignment(t *testing.T, bs blobstore.Blobstore) (string, map[string]string) {
	t.Helper()
	p, ok, err := readCompletedPointer(t.Context(), bs)
	if err != nil || !ok {
		t.Fatalf("pointer: %+v, %v, %v", p, ok, err)
	}
	rc, err := bs.Get(t.Context(), jobPrefix+"/checkpoints/"+p.ID+"/checkpoint.json")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Workers map[string]string `json:"workers"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("record of %s: %v", p.ID, err)
	}
	return p.ID, rec.Workers
}

// TestWorkersKilledWorkerReplacedThenResumedWithTwoWorkersExactlyOnce: a
// coordinator container and three worker containers run the job on
// MinIO. After two completed checkpoints one worker container is killed
// (docker kill); a fresh container with an empty disk connects for its
// slot, restores only that slot's owners from the bucket while the two
// survivors roll back from their own disks, and the job goes on, the next
// completed checkpoint naming the new worker. Then the coordinator
// container itself is killed mid-run, and a new coordinator resumes the
// job with two new workers: the owners are reassigned over them, each
// restores its (now four) owners from the bucket, the job runs to its end
// on the new assignment, which its last checkpoint records, and the
// exactly-once check passes.
func TestWorkersKilledWorkerReplacedThenResumedWithTwoWorkersExactlyOnce(t *testing.T) {
	requireDocker(t)
	nw, _ := newJobNetwork(t, false)
	srv := miniotest.StartOnNetwork(t, nw.Name, "minio")
	bucket := srv.NewBucket(t)
	bs := openBucket(t, srv, bucket)
	env := s3Env(srv.AccessKey, srv.SecretKey)
	// The coordinator and the workers share a worker token, as a job
	// across hosts should: a worker without it would be refused.
	env["TIDEMARK_WORKER_TOKEN"] = "containers-" + bucket
	store := jobStoreURL(bucket, srv.NetworkEndpoint)
	const records = 40000 // 400 batches of 25ms: about 10s of work

	// Run 1: three workers, one killed and replaced.
	coord := startNode(t, nodeSpec{name: "coordinator", net: nw, env: env, args: coordinatorArgs(store, records, 3, "25ms")})
	addr := fmt.Sprintf("%s:%d", containerIP(t, coord.id, nw), workerPort)
	workers := make([]*jobNode, 3)
	for k := range workers {
		workers[k] = startWorkerContainer(t, nw, env, addr, k, fmt.Sprintf("worker-%d", k))
	}
	waitForPointer(t, bs, coord, 2*time.Minute, "second completed checkpoint", func(p jobPointer) bool { return p.seq(t) >= 2 })
	victim := workers[1]
	victim.kill()
	if code := victim.wait(time.Minute); code != 137 {
		t.Fatalf("worker-1 exit code %d after SIGKILL, want 137:\n%s", code, victim.logs())
	}
	if out := coord.logs(); strings.Contains(out, "exactly-once") {
		t.Fatalf("the job finished before worker-1 was killed (the test needs more records or a slower pace):\n%s", out)
	}
	replacement := startWorkerContainer(t, nw, env, addr, 1, "worker-1 replacement")

	// After the loss: the replacement restores slot 1's owners from the
	// bucket, the survivors roll back from their own disks.
	var lines []openedOwners
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if lines = openedLines(coord.logs()); len(lines) >= 6 {
			break
		}
		if !coord.running() || time.Now().After(deadline) {
			t.Fatalf("the coordinator logged %d opened-owner lines, want 3 at the start and 3 after the loss:\n%s", len(lines), coord.logs())
		}
	}
	newID := ""
	for _, l := range lines[3:6] {
		switch {
		case l.slot == "1" && l.from == "restored from the store" && l.worker != lines[1].worker:
			newID = l.worker
		case l.slot != "1" && l.from == "from its own disk":
		default:
			t.Errorf("after the loss, worker %s (slot %s) opened owners %s %s", l.worker, l.slot, l.owners, l.from)
		}
	}
	if newID == "" {
		t.Fatalf("no new worker took over slot 1:\n%s", coord.logs())
	}
	if !regexp.MustCompile(`worker 1 \(slot1-[0-9a-f]+\) lost: `).MatchString(coord.logs()) {
		t.Fatalf("the coordinator did not say it lost worker 1:\n%s", coord.logs())
	}
	// A completed checkpoint on the new assignment, then the coordinator
	// dies mid-run.
	var last string
	waitForPointer(t, bs, coord, 2*time.Minute, "a completed checkpoint naming the new worker", func(jobPointer) bool {
		id, assign := completedAssignment(t, bs)
		ids := slices.Collect(maps.Values(assign))
		if slices.Contains(ids, newID) {
			if slices.Contains(ids, lines[1].worker) {
				t.Fatalf("checkpoint %s assigns owners to both the killed worker %s and its replacement %s: %v", id, lines[1].worker, newID, assign)
			}
			last = id
			return true
		}
		return false
	})
	coord.kill()
	if code := coord.wait(time.Minute); code != 137 {
		t.Fatalf("coordinator exit code %d after SIGKILL, want 137:\n%s", code, coord.logs())
	}
	if out := coord.logs(); strings.Contains(out, "exactly-once") {
		t.Fatalf("the job finished before its coordinator was killed (the test needs more records or a slower pace):\n%s", out)
	}
	// The workers notice their coordinator is gone and stop.
	for _, w := range []*jobNode{workers[0], workers[2], replacement} {
		code := w.wait(time.Minute)
		t.Logf("%s stopped with exit code %d once its coordinator was gone", w.name, code)
	}
	t.Logf("run 1: worker %s killed, %s took over its owners; checkpoint %s completed on the new assignment, then the coordinator was killed", lines[1].worker, newID, last)

	// Run 2: the job resumed by a new coordinator with two workers.
	coord2 := startNode(t, nodeSpec{name: "coordinator 2", net: nw, env: env, args: coordinatorArgs(store, records, 2, "0")})
	addr2 := fmt.Sprintf("%s:%d", containerIP(t, coord2.id, nw), workerPort)
	two := []*jobNode{startWorkerContainer(t, nw, env, addr2, 0, "run 2 worker-0"), startWorkerContainer(t, nw, env, addr2, 1, "run 2 worker-1")}
	code := coord2.wait(3 * time.Minute)
	out2 := coord2.logs()
	if code != 0 {
		t.Fatalf("coordinator 2 exit code %d, want 0:\n%s", code, out2)
	}
	exactlyOnceOK(t, "run 2", out2, records)
	// It resumed mid-run from a checkpoint at or after the one on the
	// replacement's assignment (the killed coordinator may have completed
	// more).
	if id, _, offset := resumedFrom(t, out2); id < last || offset == 0 || offset >= records {
		t.Errorf("run 2 resumed from %s at record %d, want %s or later, mid-run", id, offset, last)
	}
	lines = openedLines(out2)
	if len(lines) != 2 {
		t.Fatalf("run 2 logged %d opened-owner lines, want 2:\n%s", len(lines), out2)
	}
	runTwo := map[string]bool{}
	for _, l := range lines {
		runTwo[l.worker] = true
		if l.from != "restored from the store" || strings.Count(l.owners, ",") != 3 {
			t.Errorf("run 2: worker %s (slot %s) opened owners %s %s; want four owners restored from the store", l.worker, l.slot, l.owners, l.from)
		}
	}
	// The job's last checkpoint records the new assignment: the two new
	// workers, four owners each.
	final, assign := completedAssignment(t, bs)
	perWorker := map[string]int{}
	for _, w := range assign {
		perWorker[w]++
	}
	if len(assign) != 8 || len(perWorker) != 2 {
		t.Errorf("the last checkpoint %s assigns %v, want 8 owners over the 2 new workers", final, assign)
	}
	for w, n := range perWorker {
		if !runTwo[w] || n != 4 {
			t.Errorf("the last checkpoint %s gives %d owners to %s, want 4 to each of run 2's workers %v", final, n, w, runTwo)
		}
	}
	for _, w := range two {
		if code := w.wait(time.Minute); code != 0 {
			t.Errorf("%s exit code %d, want 0:\n%s", w.name, code, w.logs())
		}
	}
}
