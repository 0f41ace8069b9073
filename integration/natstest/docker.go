package natstest

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/tidemark-io/tidemark/integration/miniotest"
)

// ImageRepository is the local repository of the images EnsureImage
// builds; the tag is the nats-server version inside.
const ImageRepository = "tidemark-nats"

// labelHarness marks the containers this package starts, so that those a
// killed test binary leaked can be found (and removed by id).
const labelHarness = "tidemark.natstest"

// dockerfile: scratch has no shell, so /data and /tmp come from the
// build context; the configuration is copied in when a container starts.
const dockerfile = `FROM scratch
COPY rootfs/ /
COPY nats-server /usr/bin/nats-server
LABEL ` + labelHarness + `.version="%s"
EXPOSE 4222
ENTRYPOINT ["/usr/bin/nats-server"]
CMD ["-c", "/etc/nats/nats.conf"]
`

var image struct {
	mu  sync.Mutex
	tag string
}

// DockerAvailable reports nil when a Docker daemon answers.
func DockerAvailable(ctx context.Context) error {
	_, err := miniotest.DockerClient(ctx)
	return err
}

// EnsureImage returns the tag of the local FROM scratch image running the
// installed nats-server, building it when the tag does not exist yet.
func EnsureImage(ctx context.Context) (string, error) {
	image.mu.Lock()
	defer image.mu.Unlock()
	if image.tag != "" {
		return image.tag, nil
	}
	cli, err := miniotest.DockerClient(ctx)
	if err != nil {
		return "", fmt.Errorf("natstest: Docker is not available: %w", err)
	}
	bin, err := BinaryPath()
	if err != nil {
		return "", err
	}
	version := binaryVersion(bin)
	if version == "" {
		version = "unknown"
	}
	tag := ImageRepository + ":" + version
	_, err = cli.ImageInspect(ctx, tag)
	switch {
	case cerrdefs.IsNotFound(err):
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		err = miniotest.BuildImage(bctx, tag, miniotest.ImageSpec{
			Dockerfile: fmt.Sprintf(dockerfile, version),
			Dirs:       map[string]int64{"rootfs/": 0o755, "rootfs/data/": 0o755, "rootfs/etc/": 0o755, "rootfs/etc/nats/": 0o755, "rootfs/tmp/": 0o1777},
			Files:      map[string]string{"nats-server": bin},
			Labels:     map[string]string{labelHarness + ".image": "true"},
		})
		if err != nil {
			return "", err
		}
	case err != nil:
		return "", fmt.Errorf("natstest: inspect image %s: %w", tag, err)
	}
	image.tag = tag
	return tag, nil
}

// containerBackend is a nats-server container.
type containerBackend struct {
	ctr         testcontainers.Container
	containerID string
	client      *testcontainers.DockerClient
}

// dockerImage returns the Docker client and the nats-server image, failing
// the test when no Docker daemon answers or the image cannot be built.
func dockerImage(t testing.TB) (*testcontainers.DockerClient, string) {
	t.Helper()
	cli, err := miniotest.DockerClient(t.Context())
	if err != nil {
		t.Fatalf("natstest: Docker is not available: %v", err)
	}
	img, err := EnsureImage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cli, img
}

// StartDocker starts nats-server in a container of the FROM scratch image,
// its client port bound to a free port of 127.0.0.1 (kept across Restart),
// and removes the container by id in t.Cleanup. It fails the test when no
// Docker daemon answers.
func StartDocker(t testing.TB, opts ...Options) *Server {
	t.Helper()
	ctx := t.Context()
	cli, img := dockerImage(t)
	conf := config("0.0.0.0:4222", "/data", options(opts))
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("natstest: choose a port: %v", err)
		}
		s, err := runContainer(ctx, cli, img, port, conf)
		if err == nil {
			registerCleanup(t, s)
			if err := s.waitReady(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "port is already allocated") && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatal(lastErr)
	return nil
}

func runContainer(ctx context.Context, cli *testcontainers.DockerClient, img string, port int, conf string) (*Server, error) {
	return startContainer(ctx, cli, img, port, conf, "", "")
}

// startContainer runs img with conf, its client port on host port port.
// With a networkName, the container joins it under the alias name.
func startContainer(ctx context.Context, cli *testcontainers.DockerClient, img string, port int, conf, networkName, name string) (*Server, error) {
	req := testcontainers.ContainerRequest{
		Image:        img,
		ExposedPorts: []string{"4222/tcp"},
		Labels:       map[string]string{labelHarness: "true"},
		Files: []testcontainers.ContainerFile{{
			Reader:            strings.NewReader(conf),
			ContainerFilePath: "/etc/nats/nats.conf",
			FileMode:          0o644,
		}},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{
				network.MustParsePort("4222/tcp"): {{
					HostIP:   netip.MustParseAddr("127.0.0.1"),
					HostPort: strconv.Itoa(port),
				}},
			}
		},
	}
	what := "container"
	if networkName != "" {
		req.Networks = []string{networkName}
		req.NetworkAliases = map[string][]string{networkName: {name}}
		what = "container " + name
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req,
		Started:          true,
		Logger:           tclog.NewNoopLogger(),
	})
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("natstest: start %s from %s: %w", what, img, err)
	}
	b := &containerBackend{ctr: ctr, containerID: ctr.GetContainerID(), client: cli}
	return &Server{URL: "nats://" + hostPort(port), User: DefaultUser, Password: DefaultPassword, mode: ModeDocker, b: b}, nil
}

func (c *containerBackend) stop(ctx context.Context, graceful bool) error {
	if graceful {
		grace := stopGrace
		return c.ctr.Stop(ctx, &grace)
	}
	_, err := c.client.ContainerKill(ctx, c.containerID, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "is not running") {
		return err
	}
	// Kill returns before the container is down; a Restart must not race it.
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

// start starts the stopped container again: same port binding, and the
// store in its writable layer.
func (c *containerBackend) start(ctx context.Context) error { return c.ctr.Start(ctx) }

// terminate stops and removes the container by id.
func (c *containerBackend) terminate(ctx context.Context) error {
	err := c.ctr.Terminate(ctx, testcontainers.StopTimeout(time.Second))
	if err != nil && !cerrdefs.IsNotFound(err) {
		return err
	}
	return nil
}

func (c *containerBackend) exited() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.client.ContainerInspect(ctx, c.containerID, client.ContainerInspectOptions{})
	if err != nil {
		return nil // unknown: the deadline decides
	}
	st := res.Container.State
	if st != nil && !st.Running && !st.Restarting && st.Status != container.StateCreated {
		return fmt.Errorf("container %s: exit code %d %s", st.Status, st.ExitCode, st.Error)
	}
	return nil
}

func (c *containerBackend) logs() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := miniotest.ContainerLogs(ctx, c.ctr)
	if len(out) > 8<<10 {
		out = out[len(out)-8<<10:]
	}
	return out
}

func (c *containerBackend) id() string {
	id := c.containerID
	if len(id) > 12 {
		id = id[:12]
	}
	return "nats-server container " + id
}
