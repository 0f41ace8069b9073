package integration

// The harness of the container tests (containers_test.go): the tidemark
// binary in a FROM scratch image, job containers on user-defined Docker
// networks, and reading the job's pointers from the test.
//
// Every container and network is removed by id in t.Cleanup. Images are
// kept: they are tagged by the digest of the binary inside, so the next
// run reuses the image exactly while the binary is the same.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// jobImageRepository is the local repository of the job images; the tag
// is "sha-" and a prefix of the SHA-256 of the binary inside.
const jobImageRepository = "tidemark-demo"

// jobLabel marks every container and network these tests create, so that
// what a killed test binary leaked can be found (and removed by id).
const jobLabel = "tidemark.integration"

// jobDockerfile: scratch has no shell and no mkdir, so the writable
// directories come from the build context (rootfs/). The job's local
// working directories go under /work; HOME and TMPDIR point at /tmp,
// which the CLI uses for the temporary state of savepoint restore.
const jobDockerfile = `FROM scratch
COPY rootfs/ /
COPY tidemark /usr/bin/tidemark
LABEL ` + jobLabel + `.image="true"
ENV HOME=/tmp TMPDIR=/tmp
WORKDIR /work
ENTRYPOINT ["/usr/bin/tidemark"]
`

// imageCache holds the tag of one image once it is built, per test binary.
type imageCache struct {
	mu    sync.Mutex
	image string
}

// jobImageCache holds the tag of the job image once jobImage has it.
var jobImageCache imageCache

// get returns the tag of an image of repo holding the binary build returns.
// It calls create only when no image holds this exact binary.
func (c *imageCache) get(t *testing.T, repo string, build func(context.Context) string, create func(ctx context.Context, bin, tag string) error) string {
	t.Helper()
	cli := requireDocker(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.image != "" {
		return c.image
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := build(ctx)
	sum, err := fileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	tag := repo + ":sha-" + sum[:16]
	_, err = cli.ImageInspect(ctx, tag)
	switch {
	case cerrdefs.IsNotFound(err):
		if err := create(ctx, bin, tag); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatalf("inspect image %s: %v", tag, err)
	}
	c.image = tag
	return tag
}

// requireDocker returns the Docker client, or skips the test, loudly, when
// no daemon answers: the container tests cannot run without one (unlike
// the MinIO tests, which fall back to a process). Any other failure fails.
func requireDocker(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	// miniotest's client, probed once per test binary: it also keeps
	// testcontainers from using Ryuk, whose image cannot be pulled here
	// (the tests remove what they create themselves).
	cli, err := miniotest.DockerClient(context.Background())
	if err != nil {
		msg := fmt.Sprintf("\n%s\nSKIPPING CONTAINER TEST %s: no Docker daemon answers (%v).\n"+
			"This test runs the job in real containers and cannot run without Docker.\n%s",
			strings.Repeat("!", 72), t.Name(), err, strings.Repeat("!", 72))
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	return cli
}

// jobImage returns the tag of an image holding the tidemark binary built
// from this checkout, building the binary (always: the go build cache
// makes an unchanged one cheap) and the image (only when no image holds
// this exact binary).
func jobImage(t *testing.T) string {
	t.Helper()
	build := func(ctx context.Context) string { return buildTidemark(ctx, t) }
	return jobImageCache.get(t, jobImageRepository, build, buildJobImage)
}

// buildTidemark compiles cmd/tidemark as a static binary (the image has no
// libc) and returns its path.
func buildTidemark(ctx context.Context, t testing.TB) string {
	t.Helper()
	root := moduleRoot(ctx, t)
	bin := filepath.Join(t.TempDir(), "tidemark")
	start := time.Now()
	// -trimpath makes the binary depend only on the sources, so that the
	// image tag (its digest) changes only when they do.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/tidemark")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/tidemark: %v\n%s", err, out)
	}
	t.Logf("built cmd/tidemark in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// moduleRoot returns the directory of this checkout's go.mod.
func moduleRoot(ctx context.Context, t testing.TB) string {
	t.Helper()
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" {
		t.Fatalf("go env GOMOD: not in a module (%q)", gomod)
	}
	return root
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildJobImage builds tag from the binary, with the writable
// directories the job uses: /tmp and its working directories under /work.
func buildJobImage(ctx context.Context, bin, tag string) error {
	start := time.Now()
	err := miniotest.BuildImage(ctx, tag, miniotest.ImageSpec{
		Dockerfile: jobDockerfile,
		Dirs:       map[string]int64{"rootfs/": 0o755, "rootfs/tmp/": 0o1777, "rootfs/work/": 0o1777},
		Files:      map[string]string{"tidemark": bin},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "integration: built image %s in %v\n", tag, time.Since(start).Round(time.Millisecond))
	return nil
}

// newJobNetwork creates a user-defined bridge network and removes it, by
// id, when the test ends (after the containers on it: cleanups run last
// in, first out, and the containers are created later).
//
// With pinnable true the network gets a subnet of its own, which Docker
// requires before it lets a container (re)connect with a fixed address;
// dynamic addresses then come from the lower half only, so that the
// upper half is free for pinnedIP.
func newJobNetwork(t *testing.T, pinnable bool) (*testcontainers.DockerNetwork, netip.Prefix) {
	t.Helper()
	requireDocker(t)
	ctx := t.Context()
	opts := []network.NetworkCustomizer{network.WithLabels(map[string]string{jobLabel: "true"})}
	var subnet netip.Prefix
	var nw *testcontainers.DockerNetwork
	var err error
	for attempt := 0; ; attempt++ {
		o := opts
		if pinnable {
			// A subnet nobody else uses: Docker refuses overlapping ones,
			// so try a few at random.
			subnet = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, byte(rand.IntN(256)), 0}), 24)
			half := netip.PrefixFrom(subnet.Addr(), 25)
			o = append(o, network.WithIPAM(&mobynet.IPAM{Config: []mobynet.IPAMConfig{{Subnet: subnet, IPRange: half}}}))
		}
		nw, err = network.New(ctx, o...)
		if err == nil || !pinnable || attempt == 20 || !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := nw.Remove(ctx); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove network %s: %v", nw.ID, err)
		}
	})
	return nw, subnet
}

// pinnedIP returns host number n (128-254) of a pinnable network's subnet.
func pinnedIP(subnet netip.Prefix, n byte) netip.Addr {
	a := subnet.Addr().As4()
	a[3] = n
	return netip.AddrFrom4(a)
}

// containerIP returns the address of container id on network nw.
func containerIP(t *testing.T, id string, nw *testcontainers.DockerNetwork) netip.Addr {
	t.Helper()
	res, err := requireDocker(t).ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	ep, ok := res.Container.NetworkSettings.Networks[nw.Name]
	if !ok || !ep.IPAddress.IsValid() {
		t.Fatalf("container %s has no address on network %s", id, nw.Name)
	}
	return ep.IPAddress
}

// jobNode is a container running the tidemark binary: a node of the job
// (tidemark demo) or one CLI command.
type jobNode struct {
	t    *testing.T
	name string // for messages: "node-1", "zombie", ...
	id   string
	ctr  testcontainers.Container
	cli  *testcontainers.DockerClient
}

// nodeSpec describes a jobNode.
type nodeSpec struct {
	name string
	net  *testcontainers.DockerNetwork
	ip   netip.Addr // pinned address on net, or the zero Addr
	env  map[string]string
	args []string
}

// startNode creates and starts a container of the job image on spec.net
// and removes it, by id, when the test ends. A fresh container has an
// empty disk: nothing of an earlier node is in it.
func startNode(t *testing.T, spec nodeSpec) *jobNode {
	t.Helper()
	img := jobImage(t)
	cli := requireDocker(t)
	req := testcontainers.ContainerRequest{
		Image:    img,
		Cmd:      spec.args,
		Env:      spec.env,
		Labels:   map[string]string{jobLabel: "true"},
		Networks: []string{spec.net.Name},
	}
	if spec.ip.IsValid() {
		req.EndpointSettingsModifier = func(m map[string]*mobynet.EndpointSettings) {
			if ep := m[spec.net.Name]; ep != nil {
				ep.IPAMConfig = &mobynet.EndpointIPAMConfig{IPv4Address: spec.ip}
			}
		}
	}
	ctr, err := testcontainers.GenericContainer(t.Context(), testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
		Logger:           tclog.NewNoopLogger(),
	})
	if ctr != nil {
		n := &jobNode{t: t, name: spec.name, id: ctr.GetContainerID(), ctr: ctr, cli: cli}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if t.Failed() {
				t.Logf("--- %s (container %.12s) output:\n%s", n.name, n.id, n.logsCtx(ctx))
			}
			if err := ctr.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("remove %s container %s: %v", n.name, n.id, err)
			}
		})
		if err == nil {
			t.Logf("%s: container %.12s: tidemark %s", spec.name, n.id, strings.Join(spec.args, " "))
			return n
		}
	}
	t.Fatalf("start %s: %v", spec.name, err)
	return nil
}

// kill sends SIGKILL (docker kill): the process dies at once, without
// running any cleanup, like a node that loses power.
func (n *jobNode) kill() {
	n.t.Helper()
	if _, err := n.cli.ContainerKill(n.t.Context(), n.id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		n.t.Fatalf("kill %s: %v", n.name, err)
	}
}

// running reports whether the container's process is still running.
func (n *jobNode) running() bool {
	n.t.Helper()
	res, err := n.cli.ContainerInspect(n.t.Context(), n.id, client.ContainerInspectOptions{})
	if err != nil {
		n.t.Fatalf("inspect %s: %v", n.name, err)
	}
	return res.Container.State != nil && res.Container.State.Running
}

// wait waits until the container stops and returns its exit code.
func (n *jobNode) wait(timeout time.Duration) int {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), timeout)
	defer cancel()
	res := n.cli.ContainerWait(ctx, n.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case r := <-res.Result:
		if r.Error != nil && r.Error.Message != "" {
			n.t.Fatalf("wait for %s: %s", n.name, r.Error.Message)
		}
		return int(r.StatusCode)
	case err := <-res.Error:
		n.t.Fatalf("%s did not stop within %v: %v\n%s", n.name, timeout, err, n.logs())
	}
	return -1
}

// logs returns everything the container wrote to stdout and stderr.
func (n *jobNode) logs() string {
	return n.logsCtx(n.t.Context())
}

func (n *jobNode) logsCtx(ctx context.Context) string {
	return miniotest.ContainerLogs(ctx, n.ctr)
}

// disconnect cuts the container off the network: its process keeps
// running, and everything it sends goes nowhere.
func (n *jobNode) disconnect(nw *testcontainers.DockerNetwork) {
	n.t.Helper()
	if _, err := n.cli.NetworkDisconnect(n.t.Context(), nw.ID, client.NetworkDisconnectOptions{Container: n.id}); err != nil {
		n.t.Fatalf("disconnect %s from %s: %v", n.name, nw.Name, err)
	}
}

// reconnect attaches the container to the network again with address ip,
// the one it had: connections it opened before the cut then carry on, as
// they do when a real partition heals.
func (n *jobNode) reconnect(nw *testcontainers.DockerNetwork, ip netip.Addr) {
	n.t.Helper()
	_, err := n.cli.NetworkConnect(n.t.Context(), nw.ID, client.NetworkConnectOptions{
		Container:      n.id,
		EndpointConfig: &mobynet.EndpointSettings{IPAMConfig: &mobynet.EndpointIPAMConfig{IPv4Address: ip}},
	})
	if err != nil {
		n.t.Fatalf("reconnect %s to %s: %v", n.name, nw.Name, err)
	}
}

// runCLI runs one tidemark command in a container to its end and returns
// its exit code and output.
func runCLI(t *testing.T, nw *testcontainers.DockerNetwork, env map[string]string, args ...string) (int, string) {
	t.Helper()
	n := startNode(t, nodeSpec{name: "tidemark " + args[0] + " " + args[1], net: nw, env: env, args: args})
	code := n.wait(2 * time.Minute)
	return code, n.logs()
}

// s3Env is the environment that gives a job container the server's
// credentials through the standard AWS chain.
func s3Env(accessKey, secretKey string) map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     accessKey,
		"AWS_SECRET_ACCESS_KEY": secretKey,
		"AWS_REGION":            "us-east-1",
	}
}

// jobStoreURL is the store URL of the job under prefix "job" of bucket, as
// a container reaches it at endpoint.
func jobStoreURL(bucket, endpoint string, extra ...string) string {
	u := fmt.Sprintf("s3://%s/%s?endpoint=%s&path_style=true&region=us-east-1", bucket, jobPrefix, endpoint)
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// jobPrefix is the prefix of the job's objects in its bucket.
const jobPrefix = "job"

// jobPointer is the content of the job's _latest-completed pointer.
type jobPointer struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

// seq is the sequence number of the pointer's checkpoint (0 for none).
func (p jobPointer) seq(t *testing.T) uint64 {
	t.Helper()
	if p.ID == "" {
		return 0
	}
	n, err := checkpoint.ParseID(p.ID)
	if err != nil {
		t.Fatalf("pointer names %q: %v", p.ID, err)
	}
	return n
}

// readCompletedPointer reads the job's _latest-completed pointer from the
// test's side; ok is false while there is none.
func readCompletedPointer(ctx context.Context, bs blobstore.Blobstore) (p jobPointer, ok bool, err error) {
	rc, err := bs.Get(ctx, jobPrefix+"/_latest-completed")
	if errors.Is(err, blobstore.ErrNotFound) {
		return jobPointer{}, false, nil
	}
	if err != nil {
		return jobPointer{}, false, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return jobPointer{}, false, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return jobPointer{}, false, fmt.Errorf("pointer %s: %w", bytes.TrimSpace(b), err)
	}
	return p, true, nil
}

// waitForPointer polls the pointer until cond holds and returns it; it
// fails the test when node stops first or timeout passes.
func waitForPointer(t *testing.T, bs blobstore.Blobstore, node *jobNode, timeout time.Duration, what string, cond func(jobPointer) bool) jobPointer {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p, ok, err := readCompletedPointer(t.Context(), bs)
		if err != nil {
			t.Fatalf("read pointer: %v", err)
		}
		if ok && cond(p) {
			return p
		}
		if !node.running() {
			t.Fatalf("%s stopped before %s (pointer %+v):\n%s", node.name, what, p, node.logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v (pointer %+v):\n%s", what, timeout, p, node.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resumedRE matches the demo's start line after a restore. The run in
// one process (on the job runtime) does not name recovery's action there.
var resumedRE = regexp.MustCompile(`resumed from checkpoint (ckpt-\d+)(?: \(([a-z-]+)\))? at record (\d+)`)

// resumedFrom returns the checkpoint a demo run resumed from, recovery's
// action ("" when the line does not say) and the record offset, or fails
// the test.
func resumedFrom(t *testing.T, logs string) (id, action string, offset uint64) {
	t.Helper()
	m := resumedRE.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("the run did not say it resumed from a checkpoint:\n%s", logs)
	}
	if _, err := fmt.Sscan(m[3], &offset); err != nil {
		t.Fatal(err)
	}
	return m[1], m[2], offset
}

// exactlyOnceOK fails the test unless the demo's output says the
// exactly-once check passed for records records.
func exactlyOnceOK(t *testing.T, name, logs string, records int) {
	t.Helper()
	want := fmt.Sprintf("exactly-once: OK, %d records", records)
	if !strings.Contains(logs, want) {
		t.Fatalf("%s: no %q in its output:\n%s", name, want, logs)
	}
}
