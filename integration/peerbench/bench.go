package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/savepoint"
)

// The private servers' credentials and region; they listen on 127.0.0.1.
const (
	accessKey = "peerbench"
	secretKey = "peerbench-secret-key"
	region    = "us-east-1"
	bucket    = "bench"
	label     = "peerbench"
)

// The tools, in the order of the table's columns.
var tools = []string{"tidemark", "mc", "rclone"}

// The operations, in the order of the table's rows.
var ops = []string{"upload", "checkpoint", "restore", "get", "download", "copy"}

var opTitles = map[string]string{
	"upload":     "upload of a non-seekable stream (Put / mc pipe / rclone rcat)",
	"checkpoint": "full checkpoint of %d × %s files (Save / mc cp --recursive / rclone copy --transfers %d)",
	"restore":    "restore into an empty directory (Restore / mc cp --recursive / rclone copy --transfers %d)",
	"get":        "one GET of one object streamed to a file (Get / mc cat / rclone cat)",
	"download":   "download of one object as a stream (GetParallel / mc cat / rclone cat)",
	"copy":       "savepoint copy between two MinIO servers (CopySavepoint / mc mirror / rclone copy)",
}

// sample is one timed run of one operation by one tool.
type sample struct {
	op, tool string
	round    int
	seconds  float64
	bytes    int64
	maxRSS   int64 // bytes
}

func (s sample) mbps() float64 { return float64(s.bytes) / s.seconds / 1e6 }

// bench is one run: the servers, the work directory and the samples.
type bench struct {
	cfg      config
	work     string
	src, dst *server
	files    string // the checkpoint's files, prepared once
	savept   int64  // the savepoint's size (its files')
	samples  []sample
	log      io.Writer
	toolPath map[string]string
}

// run performs the whole benchmark and writes the table to w, the CSV and
// the PNG to cfg.out.
func run(ctx context.Context, cfg config, w io.Writer) ([]sample, error) {
	b := &bench{cfg: cfg, log: w, toolPath: map[string]string{}}
	for _, name := range []string{"minio", "mc", "rclone"} {
		p := filepath.Join(cfg.bin, name)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s not found in %s (install with scripts/install-minio.sh and scripts/install-peers.sh, or make deps): %w", name, cfg.bin, err)
		}
		b.toolPath[name] = p
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(cfg.out, "work-")
	if err != nil {
		return nil, err
	}
	b.work = work
	defer os.RemoveAll(work)

	if b.src, err = startServer(ctx, b.toolPath["minio"], filepath.Join(work, "minio-a")); err != nil {
		return nil, err
	}
	defer b.src.stop()
	if b.dst, err = startServer(ctx, b.toolPath["minio"], filepath.Join(work, "minio-b")); err != nil {
		return nil, err
	}
	defer b.dst.stop()
	fmt.Fprintf(w, "peerbench: MinIO at %s and %s (pids %d, %d); mc %s, rclone %s; %d rounds\n",
		b.src.endpoint, b.dst.endpoint, b.src.cmd.Process.Pid, b.dst.cmd.Process.Pid, McVersion, RcloneVersion, cfg.rounds)
	if err := b.setup(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	for r := range cfg.rounds {
		if err := b.round(ctx, r); err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
	}
	if err := b.report(w); err != nil {
		return nil, err
	}
	return b.samples, nil
}

// setup makes the buckets, the checkpoint's files, the object the
// download reads and the savepoint the copy copies.
func (b *bench) setup(ctx context.Context) error {
	for _, alias := range []string{"src", "dst"} {
		if _, err := b.mc(ctx, nil, nil, "mb", "--ignore-existing", alias+"/"+bucket); err != nil {
			return err
		}
	}
	// The download reads an object of the stream's size, put by mc (any
	// uploader would do: it is the same object for every tool).
	if b.cfg.runs("download") {
		if _, err := b.mc(ctx, newStream(99, b.cfg.streamSize), nil, "pipe", "src/"+bucket+"/stream"); err != nil {
			return err
		}
	}
	// The single GET reads an object put by Tidemark, which carries the
	// whole object's CRC32C: Get checks it as it streams. (mc's multipart
	// upload leaves a composite checksum, which the SDK does not check.)
	if b.cfg.runs("get") {
		if _, err := b.child(ctx, childOp{Op: "put", Endpoint: b.src.endpoint, Bucket: bucket, Key: getKey}, newStream(98, b.cfg.streamSize), nil); err != nil {
			return err
		}
	}
	if !b.cfg.runs("checkpoint") && !b.cfg.runs("copy") {
		return nil // no files, no savepoint
	}
	b.files = filepath.Join(b.work, "files")
	if err := os.MkdirAll(b.files, 0o755); err != nil {
		return err
	}
	for i := range b.cfg.files {
		f, err := os.Create(filepath.Join(b.files, fmt.Sprintf("%06d.sst", i+1)))
		if err != nil {
			return err
		}
		_, err = io.Copy(f, newStream(uint64(i+1), b.cfg.fileSize))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	// The savepoint: the checkpoint's files archived by CreateSavepoint.
	fsDir := filepath.Join(b.work, "savepoint-source")
	fstore := checkpoint.NewFileStorage(fsDir)
	id := checkpoint.NewID(1)
	if err := linkFiles(b.files, filepath.Join(fstore.StateDir(id), "op-0")); err != nil {
		return err
	}
	if err := fstore.Save(ctx, record(id)); err != nil {
		return err
	}
	store, err := openStore(ctx, b.src.endpoint, bucket, savepointPrefix)
	if err != nil {
		return err
	}
	if _, err := checkpoint.CreateSavepoint(ctx, fstore, store, label); err != nil {
		return err
	}
	info, err := savepoint.Stat(ctx, store, label)
	if err != nil {
		return err
	}
	b.savept = info.Bytes
	return os.RemoveAll(fsDir)
}

// linkFiles hard-links every file of from into the new directory to.
func linkFiles(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Link(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// round runs every operation once per tool, the tools in an order rotated
// by the round number, so that no tool always goes first (into a cold
// server) or last.
func (b *bench) round(ctx context.Context, r int) error {
	order := make([]string, len(tools))
	for i := range tools {
		order[i] = tools[(i+r)%len(tools)]
	}
	fmt.Fprintf(b.log, "round %d/%d (%s)\n", r+1, b.cfg.rounds, strings.Join(order, ", "))
	ckptBytes := int64(b.cfg.files) * b.cfg.fileSize
	id := checkpoint.NewID(1)
	for _, op := range b.cfg.ops {
		for _, tool := range order {
			// Each run starts with no dirty pages: none pays for the
			// writeback of what ran before it (MinIO's writes of the
			// previous operation, a peer's unsynced downloads).
			syscall.Sync()
			prefix := fmt.Sprintf("r%d-%s", r+1, tool)
			var (
				s   sample
				err error
			)
			switch op {
			case "upload":
				s, err = b.upload(ctx, tool, "up/"+prefix)
			case "checkpoint":
				s, err = b.checkpoint(ctx, tool, prefix, id)
				s.bytes = ckptBytes
			case "restore":
				s, err = b.restore(ctx, tool, prefix, id)
				s.bytes = ckptBytes
			case "get":
				s, err = b.get(ctx, tool)
			case "download":
				s, err = b.download(ctx, tool)
			case "copy":
				s, err = b.copy(ctx, tool, prefix)
				s.bytes = b.savept
			}
			if err != nil {
				return fmt.Errorf("%s by %s: %w", op, tool, err)
			}
			s.op, s.tool, s.round = op, tool, r+1
			b.samples = append(b.samples, s)
			fmt.Fprintf(b.log, "  %-10s %-8s %7.3fs %8.1f MB/s  peak RSS %4d MiB\n", op, tool, s.seconds, s.mbps(), s.maxRSS>>20)
		}
		// Remove what this operation wrote, untimed, before the next:
		// the uploads of this round, and the checkpoints once restored.
		switch op {
		case "upload":
			if _, err := b.mc(ctx, nil, nil, "rm", "--recursive", "--force", "src/"+bucket+"/up/"); err != nil {
				return err
			}
		case "restore":
			for _, tool := range tools {
				if _, err := b.mc(ctx, nil, nil, "rm", "--recursive", "--force", fmt.Sprintf("src/%s/ckpt/r%d-%s/", bucket, r+1, tool)); err != nil {
					return err
				}
			}
		case "copy":
			if _, err := b.mc(ctx, nil, nil, "rm", "--recursive", "--force", "dst/"+bucket+"/"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) upload(ctx context.Context, tool, key string) (sample, error) {
	in := newStream(7, b.cfg.streamSize)
	var s sample
	var err error
	switch tool {
	case "tidemark":
		s, err = b.child(ctx, childOp{Op: "put", Endpoint: b.src.endpoint, Bucket: bucket, Key: key}, in, nil)
	case "mc":
		s, err = b.mc(ctx, in, nil, "pipe", "src/"+bucket+"/"+key)
	case "rclone":
		s, err = b.rclone(ctx, in, nil, "rcat", "src:"+bucket+"/"+key)
	}
	s.bytes = b.cfg.streamSize
	return s, err
}

// checkpoint uploads the files as a full checkpoint under ckpt/<prefix>.
func (b *bench) checkpoint(ctx context.Context, tool, prefix string, id string) (sample, error) {
	dir := filepath.Join(b.work, "ckpt-"+prefix)
	switch tool {
	case "tidemark":
		// The files are hard-linked into the checkpoint's state
		// directory, where Save reads them (and where Pebble would have
		// made its native checkpoint).
		state := filepath.Join(dir, "state")
		store, err := openStore(ctx, b.src.endpoint, bucket, "ckpt/"+prefix)
		if err != nil {
			return sample{}, err
		}
		stateDir := blobstorage.New(store, state, blobstorage.Options{}).StateDir(id)
		if err := linkFiles(b.files, filepath.Join(stateDir, "op-0")); err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		return b.child(ctx, childOp{Op: "save", Endpoint: b.src.endpoint, Bucket: bucket, Prefix: "ckpt/" + prefix, Dir: state, ID: id, Conc: b.cfg.transfers}, nil, nil)
	case "mc":
		return b.mc(ctx, nil, nil, "cp", "--recursive", b.files+"/", "src/"+bucket+"/ckpt/"+prefix+"/")
	default:
		return b.rclone(ctx, nil, nil, "copy", "--transfers", strconv.Itoa(b.cfg.transfers), b.files, "src:"+bucket+"/ckpt/"+prefix)
	}
}

// restore downloads the checkpoint the tool uploaded into an empty
// directory, and removes it afterwards.
func (b *bench) restore(ctx context.Context, tool, prefix string, id string) (sample, error) {
	dir := filepath.Join(b.work, "restore-"+prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	switch tool {
	case "tidemark":
		return b.child(ctx, childOp{Op: "restore", Endpoint: b.src.endpoint, Bucket: bucket, Prefix: "ckpt/" + prefix, Dir: dir, ID: id, Conc: b.cfg.transfers}, nil, nil)
	case "mc":
		return b.mc(ctx, nil, nil, "cp", "--recursive", "src/"+bucket+"/ckpt/"+prefix+"/", dir+"/")
	default:
		return b.rclone(ctx, nil, nil, "copy", "--transfers", strconv.Itoa(b.cfg.transfers), "src:"+bucket+"/ckpt/"+prefix, dir)
	}
}

// getKey is the object the single GET reads.
const getKey = "get-object"

// get streams the setup's object with one GET into a new file, which is
// removed afterwards (untimed, before the next run's sync, so that no run
// pays for another's writeback). The file is the tool's standard output,
// as in `mc cat KEY > FILE`.
func (b *bench) get(ctx context.Context, tool string) (sample, error) {
	path := filepath.Join(b.work, "get-"+tool)
	f, err := os.Create(path)
	if err != nil {
		return sample{}, err
	}
	defer os.Remove(path)
	defer f.Close()
	var s sample
	switch tool {
	case "tidemark":
		s, err = b.child(ctx, childOp{Op: "get", Endpoint: b.src.endpoint, Bucket: bucket, Key: getKey}, nil, f)
	case "mc":
		s, err = b.mc(ctx, nil, f, "cat", "src/"+bucket+"/"+getKey)
	default:
		s, err = b.rclone(ctx, nil, f, "cat", "src:"+bucket+"/"+getKey)
	}
	if err != nil {
		return s, err
	}
	fi, err := f.Stat()
	if err != nil {
		return s, err
	}
	if fi.Size() != b.cfg.streamSize {
		return s, fmt.Errorf("%s wrote %d bytes, want %d", tool, fi.Size(), b.cfg.streamSize)
	}
	s.bytes = b.cfg.streamSize
	return s, nil
}

// download streams the setup's object to /dev/null.
func (b *bench) download(ctx context.Context, tool string) (sample, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return sample{}, err
	}
	defer null.Close()
	var s sample
	switch tool {
	case "tidemark":
		s, err = b.child(ctx, childOp{Op: "get-parallel", Endpoint: b.src.endpoint, Bucket: bucket, Key: "stream"}, nil, null)
	case "mc":
		s, err = b.mc(ctx, nil, null, "cat", "src/"+bucket+"/stream")
	default:
		s, err = b.rclone(ctx, nil, null, "cat", "src:"+bucket+"/stream")
	}
	s.bytes = b.cfg.streamSize
	return s, err
}

// savepointPrefix is the store of the savepoint in the first server's
// bucket: its label object and its content (savepoint-data/), all that
// mc and rclone mirror.
const savepointPrefix = "sp"

// copy copies the savepoint from the first server to the second, under
// <prefix>/ there.
func (b *bench) copy(ctx context.Context, tool, prefix string) (sample, error) {
	switch tool {
	case "tidemark":
		return b.child(ctx, childOp{Op: "copy", Endpoint: b.src.endpoint, DstEnd: b.dst.endpoint, Bucket: bucket, Prefix: prefix, Label: label}, nil, nil)
	case "mc":
		return b.mc(ctx, nil, nil, "mirror", "src/"+bucket+"/"+savepointPrefix+"/", "dst/"+bucket+"/"+prefix+"/")
	default:
		return b.rclone(ctx, nil, nil, "copy", "src:"+bucket+"/"+savepointPrefix, "dst:"+bucket+"/"+prefix)
	}
}

// child runs op in a re-executed peerbench.
func (b *bench) child(ctx context.Context, op childOp, stdin io.Reader, stdout io.Writer) (sample, error) {
	self, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	js, err := json.Marshal(op)
	if err != nil {
		return sample{}, err
	}
	return b.exec(ctx, self, []string{childEnv + "=" + string(js)}, stdin, stdout)
}

func (b *bench) mc(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) (sample, error) {
	env := []string{
		"MC_HOST_src=" + hostURL(b.src.endpoint),
		"MC_HOST_dst=" + hostURL(b.dst.endpoint),
	}
	return b.exec(ctx, b.toolPath["mc"], env, stdin, stdout,
		append([]string{"--config-dir", filepath.Join(b.work, "mc"), "--quiet", "--no-color", "--disable-pager"}, args...)...)
}

func (b *bench) rclone(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) (sample, error) {
	var env []string
	for remote, ep := range map[string]string{"SRC": b.src.endpoint, "DST": b.dst.endpoint} {
		p := "RCLONE_CONFIG_" + remote + "_"
		env = append(env, p+"TYPE=s3", p+"PROVIDER=Minio", p+"ENDPOINT="+ep, p+"REGION="+region,
			p+"ACCESS_KEY_ID="+accessKey, p+"SECRET_ACCESS_KEY="+secretKey)
	}
	// No config file: the remotes come from the environment alone.
	env = append(env, "RCLONE_CONFIG="+filepath.Join(b.work, "rclone.conf"))
	return b.exec(ctx, b.toolPath["rclone"], env, stdin, stdout, append([]string{"-q"}, args...)...)
}

// hostURL is mc's MC_HOST_<alias> form of an endpoint.
func hostURL(endpoint string) string {
	return strings.Replace(endpoint, "http://", "http://"+accessKey+":"+secretKey+"@", 1)
}

// exec runs bin to its end and returns its wall time and peak RSS.
func (b *bench) exec(ctx context.Context, bin string, env []string, stdin io.Reader, stdout io.Writer, args ...string) (sample, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stdout == nil {
		cmd.Stdout = &stderr
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	took := time.Since(t0)
	rss := peak()
	if err != nil {
		return sample{}, fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tailOf(stderr.String(), 2000))
	}
	return sample{seconds: took.Seconds(), maxRSS: rss}, nil
}

// watchPeakRSS samples the high-water mark of pid's resident set (VmHWM
// in /proc/<pid>/status) every 5ms until the returned function is
// called, which returns the last value seen. The rusage of a finished
// child is no use here: Linux folds the RSS the child had before exec,
// a share of this process's, into its ru_maxrss. VmHWM belongs to the
// exec'd program alone and only grows, so only growth in its last few
// milliseconds can be missed.
func watchPeakRSS(pid int) func() int64 {
	var peak int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64); err == nil {
							peak = max(peak, kib<<10)
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stream is n bytes of incompressible data, produced as fast as it is
// read: a 4 MiB block of ChaCha8 output repeated, each copy stamped with
// its index so that no two blocks are equal. It hides every method but
// Read, so a consumer can neither seek it nor learn its length.
type stream struct {
	block []byte
	n     int64 // bytes left
	i     uint64
	off   int // in block
}

const streamBlock = 4 << 20

func newStream(seed uint64, n int64) io.Reader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	block := make([]byte, streamBlock)
	_, _ = rand.NewChaCha8(key).Read(block) // never fails
	return &stream{block: block, n: n}
}

func (s *stream) Read(p []byte) (int, error) {
	if s.n <= 0 {
		return 0, io.EOF
	}
	if s.off == 0 {
		binary.LittleEndian.PutUint64(s.block, s.i)
		s.i++
	}
	m := copy(p, s.block[s.off:])
	if int64(m) > s.n {
		m = int(s.n)
	}
	s.off = (s.off + m) % len(s.block)
	s.n -= int64(m)
	return m, nil
}

// server is a private MinIO process.
type server struct {
	cmd      *exec.Cmd
	endpoint string
	done     chan struct{}
}

// startServer runs MinIO on a free port of 127.0.0.1 with its data in dir
// and waits until it is ready.
func startServer(ctx context.Context, bin, dir string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", filepath.Join(dir, "data"), "--address", addr, "--certs-dir", filepath.Join(dir, "certs"), "--quiet")
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+accessKey, "MINIO_ROOT_PASSWORD="+secretKey, "MINIO_BROWSER=off", "MINIO_UPDATE=off")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the benchmark
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &server{cmd: cmd, endpoint: "http://" + addr, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(s.endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "minio.log"))
			return nil, fmt.Errorf("minio exited before it was ready:\n%s", tailOf(string(log), 2000))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("minio not ready after a minute")
		}
	}
}

// stop terminates the server by its PID and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
