package miniotest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

const (
	// labelHarness marks every container the harness starts, so that
	// containers leaked by a killed test binary can be found (and removed
	// by id).
	labelHarness = "tidemark.miniotest"
)

// The Docker client and the probe result are per test binary: probing
// costs a round trip and the answer does not change during a run.
var docker struct {
	once   sync.Once
	client *testcontainers.DockerClient
	err    error
}

// DockerClient returns the test binary's Docker client, or why there is
// none. The daemon is probed once per test binary, with a ping under a
// deadline of its own, and every caller shares the client, which must not
// be closed. The first call sets TESTCONTAINERS_RYUK_DISABLED=true unless
// the environment sets it, because the Ryuk reaper's image cannot be pulled
// here: whoever starts a container removes it, by id.
func DockerClient(ctx context.Context) (*testcontainers.DockerClient, error) {
	docker.once.Do(func() {
		setRyukDisabled()
		// The probe has its own deadline: an unreachable daemon must make
		// the harness fall back to process mode quickly, not hang.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		c, err := testcontainers.NewDockerClientWithOpts(pctx)
		if err != nil {
			docker.err = err
			return
		}
		if _, err := c.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			docker.err = fmt.Errorf("ping: %w", err)
			return
		}
		docker.client = c
	})
	return docker.client, docker.err
}

// dockerAvailable reports nil when a Docker daemon answers.
func dockerAvailable(ctx context.Context) error {
	_, err := DockerClient(ctx)
	return err
}

// setRyukDisabled disables the testcontainers reaper unless the environment
// already decides: its image cannot be pulled here, and the harness removes
// its containers itself. It must run before testcontainers first reads its
// configuration, which it caches.
func setRyukDisabled() {
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// dockerOptions are the variations of a server container.
type dockerOptions struct {
	kind    *serverKind
	network string   // user-defined network to attach to, or ""
	alias   string   // alias on network
	cmd     []string // replaces the image's CMD when set (a cluster node)
	noWait  bool     // return once started, before the server is ready
}

// containerBackend is a server container driven through testcontainers-go.
type containerBackend struct {
	name        string // "minio", "versitygw": for messages
	ctr         testcontainers.Container
	containerID string
	client      *testcontainers.DockerClient
}

var _ backend = (*containerBackend)(nil)

// startDocker creates and starts a server container whose S3 port is bound
// to a free port on 127.0.0.1, and waits until it is ready (unless
// opts.noWait).
func startDocker(ctx context.Context, opts dockerOptions) (*Server, error) {
	cli, err := DockerClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("miniotest: Docker is not available: %w", err)
	}
	img, err := opts.kind.image(ctx)
	if err != nil {
		return nil, err
	}
	// The port is chosen here rather than left to Docker because Docker
	// picks a new ephemeral port each time a container starts, and
	// Restart must keep Endpoint valid for clients the test already holds.
	// Between releasing the port and Docker binding it another process
	// may take it; then the start fails and is retried with another port.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("miniotest: choose a port: %w", err)
		}
		s, err := runContainer(ctx, cli, img, port, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !isPortConflict(err) {
			break
		}
	}
	return nil, lastErr
}

func runContainer(ctx context.Context, cli *testcontainers.DockerClient, img string, port int, opts dockerOptions) (*Server, error) {
	k := opts.kind
	containerPort := k.containerPort + "/tcp"
	if opts.cmd == nil {
		opts.cmd = k.containerCmd
	}
	req := testcontainers.ContainerRequest{
		Image:        img,
		ExposedPorts: []string{containerPort},
		Env:          k.containerEnv,
		Cmd:          opts.cmd,
		Labels:       map[string]string{labelHarness: "true"},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort(containerPort): {{
					HostIP:   netip.MustParseAddr("127.0.0.1"),
					HostPort: strconv.Itoa(port),
				}},
			}
		},
	}
	if opts.network != "" {
		req.Networks = []string{opts.network}
		req.NetworkAliases = map[string][]string{opts.network: {opts.alias}}
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
		// The container's lifecycle messages are noise in test output;
		// failures carry the server's own log instead.
		Logger: tclog.NewNoopLogger(),
	})
	if err != nil {
		// GenericContainer may return a created container along with the
		// error (for example when start fails); it must not leak.
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("miniotest: start container from %s: %w", img, err)
	}
	b := &containerBackend{name: k.name, ctr: ctr, containerID: ctr.GetContainerID(), client: cli}
	s := &Server{
		Endpoint:  "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		AccessKey: defaultAccessKey,
		SecretKey: defaultSecretKey,
		Region:    Region,
		mode:      ModeDocker,
		kind:      k,
		b:         b,
	}
	if opts.network != "" {
		s.NetworkAlias = opts.alias
		s.NetworkEndpoint = "http://" + net.JoinHostPort(opts.alias, k.containerPort)
	}
	if opts.noWait {
		s.running = true // started; the caller waits for readiness
		return s, nil
	}
	if err := s.waitReady(ctx); err != nil {
		_ = b.terminate(context.WithoutCancel(ctx))
		return nil, err
	}
	s.running = true
	return s, nil
}

// isPortConflict reports whether a start failed because the chosen host
// port was taken meanwhile.
func isPortConflict(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "port is already allocated") || strings.Contains(msg, "address already in use")
}

func (c *containerBackend) stop(ctx context.Context, graceful bool) error {
	if !graceful {
		_, err := c.client.ContainerKill(ctx, c.containerID, client.ContainerKillOptions{Signal: "KILL"})
		if err != nil && !isNotRunning(err) {
			return err
		}
		// Kill returns before the container is down; wait for it, so that
		// a following Restart does not race the old process for the port.
		return c.waitStopped(ctx)
	}
	grace := stopGrace
	return c.ctr.Stop(ctx, &grace)
}

func (c *containerBackend) waitStopped(ctx context.Context) error {
	for {
		res, err := c.client.ContainerInspect(ctx, c.containerID, client.ContainerInspectOptions{})
		if err != nil {
			return err
		}
		if res.Container.State == nil || !res.Container.State.Running {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func isNotRunning(err error) bool {
	return cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "is not running")
}

// start starts the stopped container again. Its host port binding was fixed
// at creation, so the endpoint is unchanged; its data is in the container's
// writable layer, which stop keeps.
func (c *containerBackend) start(ctx context.Context) error {
	return c.ctr.Start(ctx)
}

// terminate stops and removes the container (and its anonymous volumes) by
// id. The image is kept for the next test.
func (c *containerBackend) terminate(ctx context.Context) error {
	grace := time.Second
	err := c.ctr.Terminate(ctx, testcontainers.StopTimeout(grace))
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

func (c *containerBackend) exited(ctx context.Context) error {
	res, err := c.client.ContainerInspect(ctx, c.containerID, client.ContainerInspectOptions{})
	if err != nil {
		return nil // unknown: let the deadline decide
	}
	st := res.Container.State
	if st != nil && !st.Running && !st.Restarting && st.Status != container.StateCreated {
		return fmt.Errorf("container %s: exit code %d %s", st.Status, st.ExitCode, st.Error)
	}
	return nil
}

// logs returns the last 8 KiB of the container's output: the end is
// where MinIO says why it stopped.
func (c *containerBackend) logs(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := ContainerLogs(ctx, c.ctr)
	if len(out) > 8<<10 {
		out = out[len(out)-8<<10:]
	}
	return out
}

// ContainerLogs returns everything ctr wrote to stdout and stderr, or a
// note saying why there is none: it is for failure messages, which must
// not fail in turn.
func ContainerLogs(ctx context.Context, ctr testcontainers.Container) string {
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil && len(b) == 0 {
		return fmt.Sprintf("(no logs: %v)", err)
	}
	return string(b)
}

func (c *containerBackend) id() string {
	return c.name + " container " + shortID(c.containerID)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// containerExists reports whether a container with this id exists (in any
// state); tests use it to check that cleanup removed it.
func containerExists(ctx context.Context, id string) (bool, error) {
	cli, err := DockerClient(ctx)
	if err != nil {
		return false, err
	}
	_, err = cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
