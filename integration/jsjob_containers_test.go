package integration

// The job spanning hosts on NATS JetStream, in containers: integration/jsjob
// (a coordinator or a worker of connector/jetstream's partition totals job)
// in a FROM scratch image, a 3-node JetStream cluster of nats-server
// containers (natstest.StartDockerCluster) and MinIO, all on one
// user-defined Docker network. Every container and network is removed by
// id; images are kept, tagged by the digest of the binary inside.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/integration/natstest"
)

// jsjobImageRepository is the local repository of the jsjob images.
const jsjobImageRepository = "tidemark-jsjob"

const jsjobDockerfile = `FROM scratch
COPY rootfs/ /
COPY jsjob /usr/bin/jsjob
LABEL ` + jobLabel + `.image="true"
ENV HOME=/tmp TMPDIR=/tmp
WORKDIR /work
ENTRYPOINT ["/usr/bin/jsjob"]
`

var jsjobImageCache imageCache

// buildJSJob compiles integration/jsjob as a static binary into dir and
// returns its path.
func buildJSJob(ctx context.Context, t testing.TB, dir string) string {
	t.Helper()
	root := moduleRoot(ctx, t)
	bin := filepath.Join(dir, "jsjob")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./integration/jsjob")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build integration/jsjob: %v\n%s", err, out)
	}
	return bin
}

// jsjobImage returns the tag of an image holding the jsjob binary built
// from this checkout, building the image only when no image holds this
// exact binary.
func jsjobImage(t *testing.T) string {
	t.Helper()
	build := func(ctx context.Context) string { return buildJSJob(ctx, t, t.TempDir()) }
	create := func(ctx context.Context, bin, tag string) error {
		return miniotest.BuildImage(ctx, tag, miniotest.ImageSpec{
			Dockerfile: jsjobDockerfile,
			Dirs:       map[string]int64{"rootfs/": 0o755, "rootfs/tmp/": 0o1777, "rootfs/work/": 0o1777},
			Files:      map[string]string{"jsjob": bin},
		})
	}
	return jsjobImageCache.get(t, jsjobImageRepository, build, create)
}

// startJSJob starts a container running jsjob with args on nw (an empty
// disk: a new container) and removes it, by id, when the test ends.
func startJSJob(t *testing.T, nw *testcontainers.DockerNetwork, env map[string]string, name string, args ...string) *jobNode {
	t.Helper()
	img := jsjobImage(t)
	cli := requireDocker(t)
	ctr, err := testcontainers.GenericContainer(t.Context(), testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:    img,
			Cmd:      args,
			Env:      env,
			Labels:   map[string]string{jobLabel: "true"},
			Networks: []string{nw.Name},
		},
		Started: true,
		Logger:  tclog.NewNoopLogger(),
	})
	if ctr != nil {
		n := &jobNode{t: t, name: name, id: ctr.GetContainerID(), ctr: ctr, cli: cli}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if t.Failed() {
				out := n.logsCtx(ctx)
				if len(out) > 6<<10 {
					out = "…" + out[len(out)-6<<10:]
				}
				t.Logf("--- %s (container %.12s) output:\n%s", n.name, n.id, out)
			}
			if err := ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove %s container %s: %v", n.name, n.id, err)
			}
		})
		if err == nil {
			t.Logf("%s: container %.12s: jsjob %s", name, n.id, strings.Join(args, " "))
			return n
		}
	}
	t.Fatalf("start %s: %v", name, err)
	return nil
}

// checkpointRE matches a coordinator's line about a completed checkpoint.
var checkpointRE = regexp.MustCompile(`(?m)^checkpoint (ckpt-\d+)$`)

// completedCheckpoints returns the checkpoints a coordinator logged as
// completed, in order.
func completedCheckpoints(logs string) []string {
	var out []string
	for _, m := range checkpointRE.FindAllStringSubmatch(logs, -1) {
		out = append(out, m[1])
	}
	return out
}

// waitCheckpoints waits until coord logged n completed checkpoints and
// fails the test if it stops first or timeout passes.
func waitCheckpoints(t *testing.T, coord *jobNode, n int, timeout time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		logs := coord.logs()
		if len(completedCheckpoints(logs)) >= n {
			return
		}
		if strings.Contains(logs, "done:") {
			t.Fatalf("the job ended before %s (the test needs more records or a slower pace):\n%s", what, logs)
		}
		if !coord.running() {
			t.Fatalf("%s stopped before %s:\n%s", coord.name, what, logs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v:\n%s", what, timeout, logs)
		}
	}
}

// TestJetStreamFailoverInContainersExactlyOnce: the job spanning hosts on
// a 3-node JetStream cluster (input, output and the group's bucket with 3
// replicas) and MinIO, a coordinator and 3 workers, each in its own
// container. After two completed checkpoints the NATS node leading the
// group's bucket is killed (docker kill), then worker w1's container; a
// replacement worker starts on an empty disk, and once checkpoints
// complete with it the coordinator's container is killed too. A standby
// coordinator started then takes the writer role at a greater epoch
// (fencing the dead one), rolls forward what was prepared and drives the
// surviving workers to the end. Nobody else acts. The output stream
// holds each input's effect exactly once.
func TestJetStreamFailoverInContainersExactlyOnce(t *testing.T) {
	requireDocker(t)
	start := time.Now()
	nw, _ := newJobNetwork(t, false)
	cluster := natstest.StartDockerCluster(t, nw.Name, 3)
	srv := miniotest.StartOnNetwork(t, nw.Name, "minio")
	bucket := srv.NewBucket(t)
	env := s3Env(srv.AccessKey, srv.SecretKey)
	env["NATS_USER"], env["NATS_PASSWORD"] = natstest.DefaultUser, natstest.DefaultPassword
	store := jobStoreURL(bucket, srv.NetworkEndpoint)
	const parts, records = 6, 18000 // 3 workers, 300 batches of 20 each
	common := []string{"-nats", cluster.NetworkURL, "-replicas", "3", "-parts", fmt.Sprint(parts)}
	role := func(r string, extra ...string) []string {
		return append(append([]string{r}, common...), extra...)
	}
	t.Logf("cluster, MinIO and network up in %v", time.Since(start).Round(time.Millisecond))

	setup := startJSJob(t, nw, env, "setup", role("setup", "-records", fmt.Sprint(records))...)
	if code := setup.wait(2 * time.Minute); code != 0 {
		t.Fatalf("setup exit code %d:\n%s", code, setup.logs())
	}
	coordArgs := role("coordinator", "-store", store, "-dir", "/work/node", "-slots", "w0,w1,w2",
		"-interval", "1s", "-timeout", "10s")
	coord := startJSJob(t, nw, env, "coordinator", coordArgs...)
	worker := func(k int, name string) *jobNode {
		return startJSJob(t, nw, env, name, role("worker", "-store", store, "-dir", "/work/node",
			"-slot", fmt.Sprintf("w%d", k), "-partitions", fmt.Sprintf("%d,%d", k, k+3), "-delay", "50ms")...)
	}
	workers := []*jobNode{worker(0, "worker w0"), worker(1, "worker w1"), worker(2, "worker w2")}
	waitCheckpoints(t, coord, 2, 2*time.Minute, "two completed checkpoints")

	// The NATS node leading the group's bucket dies.
	leader := streamLeader(t, cluster, "KV_jsjob")
	killed := -1
	for i, name := range cluster.Names {
		if name == leader {
			killed = i
		}
	}
	if killed < 0 {
		t.Fatalf("the bucket's leader %q is none of %v", leader, cluster.Names)
	}
	cluster.Nodes[killed].Kill(t)
	t.Logf("%v: killed NATS node %s, the group bucket's leader", time.Since(start).Round(time.Millisecond), leader)

	// Worker w1 dies; a replacement with an empty disk takes its slot.
	workers[1].kill()
	if code := workers[1].wait(time.Minute); code != 137 {
		t.Fatalf("worker w1 exit code %d after SIGKILL, want 137:\n%s", code, workers[1].logs())
	}
	replacement := worker(1, "worker w1 replacement")
	t.Logf("%v: killed worker w1, started its replacement", time.Since(start).Round(time.Millisecond))
	at := len(completedCheckpoints(coord.logs()))
	waitCheckpoints(t, coord, at+2, 2*time.Minute, "two checkpoints with the replacement")
	if !strings.Contains(replacement.logs(), "checkpoint ckpt-") {
		t.Fatalf("checkpoints completed, but the replacement reported none of them:\n%s", replacement.logs())
	}

	// The coordinator dies mid-run; the standby takes over.
	coord.kill()
	if code := coord.wait(time.Minute); code != 137 {
		t.Fatalf("coordinator exit code %d after SIGKILL, want 137:\n%s", code, coord.logs())
	}
	last := completedCheckpoints(coord.logs())
	if strings.Contains(coord.logs(), "done:") {
		t.Fatalf("the job ended before its coordinator was killed (the test needs more records):\n%s", coord.logs())
	}
	t.Logf("%v: killed the coordinator after %d checkpoints (last %s); the standby starts",
		time.Since(start).Round(time.Millisecond), len(last), last[len(last)-1])
	standby := startJSJob(t, nw, env, "standby coordinator", coordArgs...)
	if code := standby.wait(3 * time.Minute); code != 0 {
		t.Fatalf("standby coordinator exit code %d, want 0:\n%s", code, standby.logs())
	}
	out := standby.logs()
	m := regexp.MustCompile(`done: (\d+) checkpoints, last (ckpt-\d+), restored "(ckpt-\d+)"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the standby did not resume from a checkpoint:\n%s", out)
	}
	if m[3] < last[len(last)-1] {
		t.Fatalf("the standby restored %s, older than %s, the last the killed coordinator completed", m[3], last[len(last)-1])
	}
	t.Logf("%v: the standby restored %s and completed %s more checkpoints, the last %s",
		time.Since(start).Round(time.Millisecond), m[3], m[1], m[2])
	for _, w := range []*jobNode{workers[0], workers[2], replacement} {
		if code := w.wait(time.Minute); code != 0 {
			t.Errorf("%s exit code %d, want 0:\n%s", w.name, code, w.logs())
		}
	}

	check := startJSJob(t, nw, env, "check", role("check", "-records", fmt.Sprint(records))...)
	code := check.wait(2 * time.Minute)
	exactlyOnceOK(t, "check", check.logs(), records)
	if code != 0 {
		t.Fatalf("check exit code %d:\n%s", code, check.logs())
	}
	t.Logf("%v: exactly-once check OK with NATS node %s still down", time.Since(start).Round(time.Millisecond), leader)
}

// streamLeader returns the server name of the node leading stream.
func streamLeader(t *testing.T, c *natstest.DockerCluster, stream string) string {
	t.Helper()
	js := c.JetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		st, err := js.Stream(ctx, stream)
		if err == nil {
			info, err := st.Info(ctx)
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				return info.Cluster.Leader
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no leader of stream %s: %v", stream, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
