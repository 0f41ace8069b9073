package miniotest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// probeSource is a static program that exits 0 once the URL it is given
// answers 200, run inside a container to check what other containers see.
const probeSource = `package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(os.Args[1])
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
`

func TestStartOnNetworkIsReachableByAliasFromOtherContainers(t *testing.T) {
	if err := dockerAvailable(t.Context()); err != nil {
		if os.Getenv(EnvMode) == ModeProcess {
			t.Skipf("StartOnNetwork needs Docker, which is not available (%v), and %s=process", err, EnvMode)
		}
		t.Fatalf("StartOnNetwork needs Docker: %v", err)
	}
	ctx := t.Context()
	nw, err := network.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first so that it runs last, after the containers on the
	// network are gone.
	t.Cleanup(func() {
		if err := nw.Remove(context.Background()); err != nil {
			t.Errorf("remove network %s: %v", nw.ID, err)
		}
	})

	s := StartOnNetwork(t, nw.Name, "minio-under-test")
	if s.NetworkEndpoint != "http://minio-under-test:9000" {
		t.Fatalf("NetworkEndpoint = %q", s.NetworkEndpoint)
	}
	// The test process reaches it through the mapped port.
	put(t, s, s.NewBucket(t), "k", []byte("v"))

	probe := buildProbe(t)
	img, err := EnsureImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The probe runs in the MinIO image only because it is the one image
	// at hand (nothing can be pulled); its entrypoint is replaced.
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:      img,
			Entrypoint: []string{"/probe", s.NetworkEndpoint + "/minio/health/live"},
			Cmd:        []string{},
			Networks:   []string{nw.Name},
			Files:      []testcontainers.ContainerFile{{HostFilePath: probe, ContainerFilePath: "/probe", FileMode: 0o755}},
			WaitingFor: wait.ForExit().WithExitTimeout(time.Minute),
		},
		Started: true,
		Logger:  tclog.TestLogger(t),
	})
	if ctr != nil {
		id := ctr.GetContainerID()
		t.Cleanup(func() {
			if err := ctr.Terminate(context.Background()); err != nil {
				t.Errorf("remove probe container %s: %v", id, err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	state, err := ctr.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.ExitCode != 0 {
		logs, _ := ctr.Logs(ctx)
		var out []byte
		if logs != nil {
			out = make([]byte, 4096)
			n, _ := logs.Read(out)
			out = out[:n]
		}
		t.Fatalf("probe on network %s could not reach %s: exit %d: %s", nw.Name, s.NetworkEndpoint, state.ExitCode, out)
	}
}

// buildProbe compiles probeSource into a static binary.
func buildProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.go")
	if err := os.WriteFile(src, []byte(probeSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	return bin
}

// TestStartClusterServesFromEveryNodeAndSurvivesOneNodeDown: an object
// written through node 1 is read through node 4; with node 4 killed,
// writes through node 1 still succeed (3 of 4 drives), and node 4
// serves again after Restart.
func TestStartClusterServesFromEveryNodeAndSurvivesOneNodeDown(t *testing.T) {
	if err := dockerAvailable(t.Context()); err != nil {
		if os.Getenv(EnvMode) == ModeProcess {
			t.Skipf("StartCluster needs Docker, which is not available (%v), and %s=process", err, EnvMode)
		}
		t.Fatalf("StartCluster needs Docker: %v", err)
	}
	nw, err := network.New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Remove(context.Background()); err != nil {
			t.Errorf("remove network %s: %v", nw.ID, err)
		}
	})
	nodes := StartCluster(t, nw.Name, "node", 4)
	if nodes[2].NetworkEndpoint != "http://node3:9000" {
		t.Fatalf("NetworkEndpoint of node 3 = %q", nodes[2].NetworkEndpoint)
	}
	bucket := nodes[0].NewBucket(t)
	put(t, nodes[0], bucket, "a", []byte("1"))
	if got := get(t, nodes[3], bucket, "a"); string(got) != "1" {
		t.Fatalf("node 4 read %q", got)
	}
	nodes[3].Kill(t)
	put(t, nodes[0], bucket, "b", []byte("2"))
	nodes[3].Restart(t)
	if got := get(t, nodes[3], bucket, "b"); string(got) != "2" {
		t.Fatalf("node 4 read %q after its restart", got)
	}
}
