// Command peerbench measures Tidemark side by side with the tools a user
// would otherwise script around, mc and rclone, on one private MinIO (and a
// second one for the savepoint copy), with the same data, alternating the
// three tools in every round:
//
//   - upload of a non-seekable stream (s3store Put / mc pipe / rclone rcat),
//     with the uploader's peak RSS;
//   - full checkpoint of a directory of files (BlobStorage.Save /
//     mc cp --recursive / rclone copy --transfers 8);
//   - restore into an empty directory (BlobStorage.Restore, every digest
//     verified, the files written with direct I/O / the same downloads);
//   - one GET of one object streamed to a file (s3store Get, through
//     blobstore.WithResumingReads as Tidemark's read paths, copied with
//     io.Copy into the child's standard output, a new file / mc cat /
//     rclone cat, each into a new file as `> FILE` would);
//   - download of one object as a stream to /dev/null (s3store
//     GetParallel, parallel ranged GETs yielded in order / mc cat /
//     rclone cat);
//   - copy of a savepoint between two MinIO servers (CopySavepoint, which
//     verifies the archive as it passes / mc mirror / rclone copy).
//
// Every operation runs in a process of its own, Tidemark's too (this
// program re-executed), so that wall time includes a process start for
// all three and peak RSS is the operation's alone. Before each run the
// benchmark syncs (untimed), so that no run pays for the writeback of
// dirty pages left by the one before. It prints medians,
// min–max and the ratio Tidemark / best peer, and writes a CSV and a PNG
// chart into -out. `make bench-peers` builds the tools (scripts/
// install-peers.sh) and runs it at full size; a test runs it at a small
// size so that it keeps working.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Versions of the peers (scripts/install-peers.sh builds the same).
const (
	RcloneVersion = "v1.76.0"
	McVersion     = "v0.0.0-20251106162529-77f82e18b540"
)

// childEnv marks a re-executed peerbench that performs one Tidemark
// operation (see child.go).
const childEnv = "PEERBENCH_CHILD"

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(2)
	}
	if _, err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	rounds     int
	streamSize int64 // the uploaded and downloaded stream
	files      int   // files in the checkpoint
	fileSize   int64
	out        string   // directory of the CSV, the PNG and the work files
	bin        string   // directory of minio, mc and rclone
	transfers  int      // rclone --transfers and Tidemark's concurrency
	ops        []string // the operations to run, in the table's order
}

// runs reports whether the run includes op.
func (c config) runs(op string) bool { return slices.Contains(c.ops, op) }

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	cache := os.Getenv("TIDEMARK_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "tidemark")
	}
	var c config
	var stream, file, only string
	fs.IntVar(&c.rounds, "rounds", 5, "rounds; each runs every operation once per tool, the tools in rotating order")
	fs.StringVar(&stream, "stream-size", "1GiB", "size of the uploaded and downloaded stream (KiB, MiB, GiB suffixes)")
	fs.IntVar(&c.files, "files", 256, "files in the checkpoint")
	fs.StringVar(&file, "file-size", "4MiB", "size of each checkpoint file")
	fs.StringVar(&c.out, "out", "peerbench-out", "directory for results.csv, results.png and the work files (removed at the end)")
	fs.StringVar(&c.bin, "bin", filepath.Join(cache, "bin"), "directory holding minio, mc and rclone")
	fs.IntVar(&c.transfers, "transfers", 8, "parallel transfers: rclone --transfers and Tidemark's Concurrency")
	fs.StringVar(&only, "ops", strings.Join(ops, ","), "operations to run, comma-separated: "+strings.Join(ops, ", ")+" (restore needs checkpoint)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, op := range ops { // in the table's order
		if slices.Contains(strings.Split(only, ","), op) {
			c.ops = append(c.ops, op)
		}
	}
	for _, op := range strings.Split(only, ",") {
		if !slices.Contains(ops, op) {
			return c, fmt.Errorf("-ops: unknown operation %q (want some of %s)", op, strings.Join(ops, ", "))
		}
	}
	if c.runs("restore") && !c.runs("checkpoint") {
		return c, fmt.Errorf("-ops: restore reads what checkpoint uploads in the same round: add checkpoint")
	}
	var err error
	if c.streamSize, err = parseSize(stream); err != nil {
		return c, fmt.Errorf("-stream-size: %w", err)
	}
	if c.fileSize, err = parseSize(file); err != nil {
		return c, fmt.Errorf("-file-size: %w", err)
	}
	if c.rounds < 1 || c.files < 1 || c.transfers < 1 {
		return c, fmt.Errorf("-rounds, -files and -transfers must be positive")
	}
	return c, nil
}
