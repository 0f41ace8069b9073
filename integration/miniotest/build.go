package miniotest

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// ImageSpec is the build context of a local image. No registry can be
// reached, so the images built here are FROM scratch: static binaries and
// the directories they write to, all supplied by the context (scratch has
// no shell to mkdir with).
type ImageSpec struct {
	// Dockerfile is the content of the context's Dockerfile.
	Dockerfile string
	// Dirs are empty directories to put in the context, by slash-separated
	// path (a trailing slash is optional), with their tar mode bits: 0o755,
	// or 0o1777 for a world-writable directory such as /tmp. They are
	// written in path order, so parents come before their subdirectories.
	Dirs map[string]int64
	// Files are host files to copy into the context, by path in the
	// context to path on the host. They are added executable (0o755),
	// with their own modification time: they are the binaries the image
	// runs.
	Files map[string]string
	// Labels are set on the image, besides any LABEL in the Dockerfile.
	Labels map[string]string
}

// BuildImage builds spec and tags the image tag, returning the daemon's
// error with the last lines of the build output when the build fails. The
// build context is streamed to the daemon as it is written rather than
// assembled in memory first: a binary in it may be 150 MB.
//
// It neither checks whether tag exists (callers reuse an image while its
// tag does) nor sets a deadline beyond ctx's.
func BuildImage(ctx context.Context, tag string, spec ImageSpec) error {
	cli, err := DockerClient(ctx)
	if err != nil {
		return fmt.Errorf("miniotest: build image %s: Docker is not available: %w", tag, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeBuildContext(pw, spec)) }()
	// Closing the read end stops the writer when the daemon fails early.
	defer pr.Close()
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      spec.Labels,
	})
	if err != nil {
		return fmt.Errorf("miniotest: build image %s: %w", tag, err)
	}
	defer res.Body.Close()
	if err := readBuildOutput(res.Body); err != nil {
		return fmt.Errorf("miniotest: build image %s: %w", tag, err)
	}
	return nil
}

// writeBuildContext writes spec as a tar stream: the Dockerfile, the
// directories in path order (parents first), then the files in path order.
func writeBuildContext(w io.Writer, spec ImageSpec) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{
		Name: "Dockerfile", Mode: 0o644, Size: int64(len(spec.Dockerfile)), ModTime: now, Typeflag: tar.TypeReg,
	}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, spec.Dockerfile); err != nil {
		return err
	}
	for _, dir := range slices.Sorted(maps.Keys(spec.Dirs)) {
		if err := tw.WriteHeader(&tar.Header{
			Name: strings.TrimSuffix(dir, "/") + "/", Mode: spec.Dirs[dir], ModTime: now, Typeflag: tar.TypeDir,
		}); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Files)) {
		if err := addFile(tw, name, spec.Files[name]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// addFile copies the host file src into tw as an executable name.
func addFile(tw *tar.Writer, name, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{
		Name: name, Mode: 0o755, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg,
	}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// readBuildOutput drains the daemon's JSON message stream and returns the
// build error it reports, if any, with the last lines of output.
func readBuildOutput(r io.Reader) error {
	dec := json.NewDecoder(r)
	var lastLines []string
	for {
		var msg struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if s := strings.TrimSpace(msg.Stream); s != "" {
			lastLines = append(lastLines, s)
			if len(lastLines) > 10 {
				lastLines = lastLines[1:]
			}
		}
		if msg.Error != "" {
			return fmt.Errorf("%s\n%s", msg.Error, strings.Join(lastLines, "\n"))
		}
	}
}
