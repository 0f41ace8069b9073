package miniotest

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// buildTestRepository holds the images these tests build; each is removed,
// by id, when its test ends.
const buildTestRepository = "tidemark-miniotest-buildtest"

// requireBuildDocker returns the Docker client, failing the test without
// one unless the process mode was asked for (then nothing here can run).
func requireBuildDocker(t *testing.T) *testcontainers.DockerClient {
	t.Helper()
	cli, err := DockerClient(t.Context())
	if err != nil {
		if os.Getenv(EnvMode) == ModeProcess {
			t.Skipf("BuildImage needs Docker, which is not available (%v), and %s=process", err, EnvMode)
		}
		t.Fatalf("BuildImage needs Docker: %v", err)
	}
	return cli
}

// buildTestTag returns a tag no other run uses, and removes the image it
// names, by id, when the test ends (if the build made one).
func buildTestTag(t *testing.T, cli *testcontainers.DockerClient) string {
	t.Helper()
	tag := fmt.Sprintf("%s:%d", buildTestRepository, time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		img, err := cli.ImageInspect(ctx, tag)
		if cerrdefs.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Errorf("inspect image %s: %v", tag, err)
			return
		}
		if _, err := cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove image %s (%s): %v", tag, img.ID, err)
		}
	})
	return tag
}

func TestBuildImageHoldsFilesDirsAndLabels(t *testing.T) {
	cli := requireBuildDocker(t)
	ctx := t.Context()
	tag := buildTestTag(t, cli)
	const content = "a static binary, say\n"
	src := filepath.Join(t.TempDir(), "hello")
	// Not executable on the host: the image must make it so.
	if err := os.WriteFile(src, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	err := BuildImage(ctx, tag, ImageSpec{
		Dockerfile: "FROM scratch\nCOPY rootfs/ /\nCOPY hello /bin/hello\nLABEL " + labelHarness + ".from-dockerfile=yes\n",
		Dirs:       map[string]int64{"rootfs": 0o755, "rootfs/tmp": 0o1777, "rootfs/data/": 0o755},
		Files:      map[string]string{"hello": src},
		Labels:     map[string]string{labelHarness + ".image": "true"},
	})
	if err != nil {
		t.Fatalf("BuildImage: %v", err)
	}

	img, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatalf("the image is not there: %v", err)
	}
	for k, want := range map[string]string{labelHarness + ".image": "true", labelHarness + ".from-dockerfile": "yes"} {
		if got := img.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q (labels %v)", k, got, want, img.Config.Labels)
		}
	}

	// A created (never started) container shows the image's filesystem;
	// scratch has nothing else in it.
	res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Image:  tag,
		Config: &container.Config{Entrypoint: []string{"/bin/hello"}, Labels: map[string]string{labelHarness: "true"}},
	})
	if err != nil {
		t.Fatalf("create a container of the image: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", res.ID, err)
		}
	})
	for _, tc := range []struct {
		path string
		mode fs.FileMode
		size int64 // checked for files only
	}{
		{"/bin/hello", 0o755, int64(len(content))},
		{"/tmp", fs.ModeDir | fs.ModeSticky | 0o777, 0},
		{"/data", fs.ModeDir | 0o755, 0},
	} {
		st, err := cli.ContainerStatPath(ctx, res.ID, client.ContainerStatPathOptions{Path: tc.path})
		if err != nil {
			t.Errorf("stat %s in the image: %v", tc.path, err)
			continue
		}
		if st.Stat.Mode != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, st.Stat.Mode, tc.mode)
		}
		if !tc.mode.IsDir() && st.Stat.Size != tc.size {
			t.Errorf("%s: %d bytes, want %d", tc.path, st.Stat.Size, tc.size)
		}
	}
}

func TestBuildImageReportsTheDaemonsError(t *testing.T) {
	cli := requireBuildDocker(t)
	ctx := t.Context()
	tag := buildTestTag(t, cli)
	err := BuildImage(ctx, tag, ImageSpec{
		Dockerfile: "FROM scratch\nCOPY not-in-context /x\n",
		Labels:     map[string]string{labelHarness + ".image": "true"},
	})
	if err == nil {
		t.Fatal("BuildImage of a Dockerfile that COPYs a missing file succeeded")
	}
	for _, want := range []string{tag, "not-in-context"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := cli.ImageInspect(ctx, tag); !cerrdefs.IsNotFound(err) {
		t.Errorf("after a failed build, inspect %s = %v, want not found", tag, err)
	}
}

func TestBuildImageFailsWhenAFileIsMissing(t *testing.T) {
	cli := requireBuildDocker(t)
	tag := buildTestTag(t, cli)
	missing := filepath.Join(t.TempDir(), "no-such-binary")
	err := BuildImage(t.Context(), tag, ImageSpec{
		Dockerfile: "FROM scratch\nCOPY bin /bin\n",
		Files:      map[string]string{"bin": missing},
	})
	if err == nil {
		t.Fatal("BuildImage with a missing host file succeeded")
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("error %q does not name the missing file %s", err, missing)
	}
}
