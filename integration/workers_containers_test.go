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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// workerPort is where the coordinator container's embedded NATS server
// listens for its workers.
const workerPort = 4222

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

// openedRE matches a worker's line about the owners it opened: its
// slot, the owners, where from.
var openedRE = regexp.MustCompile(`tidemark demo worker \(slot (\d+)\): owners ([a-z0-9,-]+), (empty|restored from the store)`)

// opened returns the owners a worker's log says it opened, in order, each
// with where from.
func opened(logs string) []string {
	var out []string
	for _, m := range openedRE.FindAllStringSubmatch(logs, -1) {
		out = append(out, m[2]+" "+m[3])
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
// coordinator container (job.RunCoordinator and an embedded NATS server)
// and three worker containers (job.RunWorker, reaching the coordinator's
// NATS port) run the job on MinIO. After two completed checkpoints one
// worker container is killed (docker kill); a fresh container with an
// empty disk takes its slot over, restores that slot's owners from the
// bucket, and the job goes on, the next completed checkpoint naming the
// new worker. Then the coordinator container itself is killed mid-run,
// and a new coordinator resumes the job with two new workers: the
// partitions and owners are reassigned over them, each restores its (now
// four) owners from the bucket, the job runs to its end on the new
// assignment, which its last checkpoint records, and the exactly-once
// check passes.
func TestWorkersKilledWorkerReplacedThenResumedWithTwoWorkersExactlyOnce(t *testing.T) {
	requireDocker(t)
	nw, _ := newJobNetwork(t, false)
	srv := miniotest.StartOnNetwork(t, nw.Name, "minio")
	bucket := srv.NewBucket(t)
	bs := openBucket(t, srv, bucket)
	env := s3Env(srv.AccessKey, srv.SecretKey)
	// The coordinator's NATS server and the workers share credentials,
	// as a job across hosts should: a worker without them is refused.
	env["TIDEMARK_NATS_USER"] = "containers"
	env["TIDEMARK_NATS_PASSWORD"] = "containers-" + bucket
	store := jobStoreURL(bucket, srv.NetworkEndpoint)
	const records = 40000 // 400 batches of 25ms over 3 workers: several seconds of work

	// Run 1: three workers, one killed and replaced.
	coord := startNode(t, nodeSpec{name: "coordinator", net: nw, env: env, args: coordinatorArgs(store, records, 3, "25ms")})
	addr := fmt.Sprintf("%s:%d", containerIP(t, coord.id, nw), workerPort)
	workers := make([]*jobNode, 3)
	for k := range workers {
		workers[k] = startWorkerContainer(t, nw, env, addr, k, fmt.Sprintf("worker-%d", k))
	}
	waitForPointer(t, bs, coord, 2*time.Minute, "second completed checkpoint", func(p jobPointer) bool { return p.seq(t) >= 2 })
	_, before := completedAssignment(t, bs)
	killed := before["part-01"] // slot 1 of 3 holds parts 1, 4 and 7
	victim := workers[1]
	victim.kill()
	if code := victim.wait(time.Minute); code != 137 {
		t.Fatalf("worker-1 exit code %d after SIGKILL, want 137:\n%s", code, victim.logs())
	}
	if out := coord.logs(); strings.Contains(out, "exactly-once") {
		t.Fatalf("the job finished before worker-1 was killed (the test needs more records or a slower pace):\n%s", out)
	}
	replacement := startWorkerContainer(t, nw, env, addr, 1, "worker-1 replacement")

	// The replacement restores slot 1's owners from the bucket, and a
	// completed checkpoint names it; then the coordinator dies mid-run.
	var last, newID string
	waitForPointer(t, bs, coord, 2*time.Minute, "a completed checkpoint naming the new worker", func(jobPointer) bool {
		id, assign := completedAssignment(t, bs)
		if w := assign["part-01"]; w != killed && strings.HasPrefix(w, "slot1-") {
			if assign["part-04"] != w || assign["part-07"] != w {
				t.Fatalf("checkpoint %s assigns slot 1's owners to several workers: %v", id, assign)
			}
			last, newID = id, w
			return true
		}
		return false
	})
	if got := opened(replacement.logs()); len(got) == 0 || got[0] != "part-01,part-04,part-07 restored from the store" {
		t.Fatalf("the replacement opened %q, want slot 1's owners restored from the store:\n%s", got, replacement.logs())
	}
	coord.kill()
	if code := coord.wait(time.Minute); code != 137 {
		t.Fatalf("coordinator exit code %d after SIGKILL, want 137:\n%s", code, coord.logs())
	}
	if out := coord.logs(); strings.Contains(out, "exactly-once") {
		t.Fatalf("the job finished before its coordinator was killed (the test needs more records or a slower pace):\n%s", out)
	}
	// The workers notice their coordinator's NATS server is gone and stop.
	for _, w := range []*jobNode{workers[0], workers[2], replacement} {
		code := w.wait(time.Minute)
		t.Logf("%s stopped with exit code %d once its coordinator was gone", w.name, code)
	}
	t.Logf("run 1: worker %s killed, %s took over its owners; checkpoint %s completed on the new assignment, then the coordinator was killed", killed, newID, last)

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
	for k, w := range two {
		if code := w.wait(time.Minute); code != 0 {
			t.Errorf("%s exit code %d, want 0:\n%s", w.name, code, w.logs())
		}
		want := []string{"part-00,part-02,part-04,part-06", "part-01,part-03,part-05,part-07"}[k] + " restored from the store"
		if got := opened(w.logs()); len(got) == 0 || got[0] != want {
			t.Errorf("%s opened %q, want %q:\n%s", w.name, got, want, w.logs())
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
		if n != 4 || strings.HasPrefix(w, "slot2-") {
			t.Errorf("the last checkpoint %s gives %d owners to %s, want 4 to each of run 2's workers", final, n, w)
		}
	}
}
