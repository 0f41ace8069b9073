//go:build linux

package job_test

// Issue 19's "done when": a sink written only from the documented
// contract (the Sink docs and the package doc, nothing of BlobSink nor of
// the demo), under a real kill -9 at every step of a checkpoint, a writer
// frozen (SIGSTOP) inside the two-phase window and woken (SIGCONT) after
// a takeover, and same-disk restarts, gives exactly-once output.
//
// The job runs in a child process: this test binary run again with
// -test.run=^TestKill9Child$ and the job's spec in killChildEnv. The
// child stops itself at one named point (points, below): it prints
// killPointLine and parks, and the parent sends SIGKILL; or, to freeze
// it, it sends itself SIGSTOP and the parent later sends SIGCONT.
// Linux only: tgkill(2) and /proc/<pid>/task tell when it is stopped.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/filestore"
	"github.com/tidemark-io/tidemark/internal/fsync"
	"github.com/tidemark-io/tidemark/job"
)

// fileSink is a Sink on a directory every node shares (a volume, or what
// an external transactional store would be), written only from the
// Sink contract:
//
//   - Write buffers the records of a Txn in memory: nothing is visible.
//     A Txn prepared already (by any run) is an error.
//   - Prepare makes them durable and committable from any node, still
//     invisible: staged/<txn>.jsonl, written to tmp/, fsynced, linked
//     into place if absent (a second Prepare of a Txn is an error).
//   - Commit makes a prepared Txn visible atomically and idempotently:
//     committed/<txn>, created if absent (link(2) of a fsynced temporary
//     file). A marker that exists is success; a Txn never prepared is an
//     error, never a silent no-op.
//   - Abort drops the buffer and the staged file (refusing a committed
//     Txn).
//
// Transactions are keyed by the whole Txn ("<id>@<writer>"). It is not a
// Sweeper: the staged files of dead writers stay, invisible.
//
// at, if set, is told of each point it passes (see points).
type fileSink struct {
	dir string
	at  func(point string)

	mu   sync.Mutex
	open map[job.Txn][]job.Record
}

func newFileSink(dir string, at func(string)) *fileSink {
	if at == nil {
		at = func(string) {}
	}
	return &fileSink{dir: dir, at: at, open: map[job.Txn][]job.Record{}}
}

func (s *fileSink) staged(txn job.Txn) string {
	return filepath.Join(s.dir, "staged", txn.String()+".jsonl")
}

func (s *fileSink) marker(txn job.Txn) string {
	return filepath.Join(s.dir, "committed", txn.String())
}

// line is one record of a staged file.
type line struct{ K, V string }

func (s *fileSink) Write(_ context.Context, txn job.Txn, recs []job.Record) error {
	s.at("write")
	// "Write never reopens a transaction of an earlier run."
	if _, err := os.Stat(s.staged(txn)); err == nil {
		return fmt.Errorf("write %s: the transaction is prepared already", txn)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open[txn] = append(s.open[txn], recs...)
	return nil
}

func (s *fileSink) Prepare(_ context.Context, txn job.Txn) error {
	s.at("prepare-begin")
	s.mu.Lock()
	recs := s.open[txn]
	delete(s.open, txn)
	s.mu.Unlock()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(line{K: string(r.Key), V: string(r.Value)}); err != nil {
			return err
		}
	}
	tmp, err := s.writeTemp(b.Bytes())
	if err != nil {
		return fmt.Errorf("prepare %s: %w", txn, err)
	}
	s.at("prepare-torn") // durable bytes under a temporary name only
	// Create-if-absent: Prepare is called once per Txn, and every run has
	// its own writer, so a staged file of this Txn is a contract breach.
	err = os.Link(tmp, s.staged(txn))
	_ = os.Remove(tmp)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", txn, err)
	}
	if err := fsync.Dir(filepath.Dir(s.staged(txn))); err != nil {
		return fmt.Errorf("prepare %s: %w", txn, err)
	}
	s.at("prepare-done")
	return nil
}

func (s *fileSink) Commit(_ context.Context, txn job.Txn) error {
	s.at("commit-begin")
	if _, err := os.Stat(s.staged(txn)); err != nil {
		return fmt.Errorf("commit %s: not prepared: %w", txn, err)
	}
	if _, err := os.Stat(s.marker(txn)); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("commit %s: %w", txn, err)
		}
		tmp, err := s.writeTemp([]byte(txn.String()))
		if err != nil {
			return fmt.Errorf("commit %s: %w", txn, err)
		}
		s.at("commit-torn") // the marker's bytes, not its name
		err = os.Link(tmp, s.marker(txn))
		_ = os.Remove(tmp)
		if err != nil && !errors.Is(err, fs.ErrExist) { // exists: another commit won
			return fmt.Errorf("commit %s: %w", txn, err)
		}
		if err := fsync.Dir(filepath.Dir(s.marker(txn))); err != nil {
			return fmt.Errorf("commit %s: %w", txn, err)
		}
	}
	s.at("commit-done")
	return nil
}

func (s *fileSink) Abort(_ context.Context, txn job.Txn) error {
	s.mu.Lock()
	delete(s.open, txn)
	s.mu.Unlock()
	if _, err := os.Stat(s.marker(txn)); err == nil {
		return fmt.Errorf("abort %s: committed", txn)
	}
	if err := os.Remove(s.staged(txn)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("abort %s: %w", txn, err)
	}
	return nil
}

// writeTemp writes b to a new fsynced file under tmp/ and returns its path.
func (s *fileSink) writeTemp(b []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "part-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// makeFileSinkDirs creates a fileSink's directories.
func makeFileSinkDirs(dir string) error {
	for _, sub := range []string{"staged", "committed", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// fileSinkOutput reads the visible output of the fileSink on dir: the
// staged records of every committed Txn, in Txn order (ids sort in
// checkpoint order).
func fileSinkOutput(t *testing.T, dir string) []job.Record {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "committed"))
	if err != nil {
		t.Fatal(err)
	}
	var out []job.Record
	for _, e := range entries { // sorted by name
		b, err := os.ReadFile(filepath.Join(dir, "staged", e.Name()+".jsonl"))
		if err != nil {
			t.Fatalf("committed %s: %v", e.Name(), err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var l line
			if err := dec.Decode(&l); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("staged %s: %v", e.Name(), err)
			}
			out = append(out, job.Record{Key: []byte(l.K), Value: []byte(l.V)})
		}
	}
	return out
}

// points counts the named points a run passes and calls hit at the nth
// pass of point at. A nil *points passes everything.
type points struct {
	at  string
	nth int
	hit func(point string)

	mu   sync.Mutex
	seen map[string]int
}

func (p *points) reach(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[name]++
	n := p.seen[name]
	p.mu.Unlock()
	if name == p.at && n == p.nth {
		p.hit(name)
	}
}

// pointSource passes "barrier" in Offsets (the runtime's barrier, before
// the state snapshot) and "eof" when the source ends.
type pointSource struct {
	job.Source
	p *points
}

func (s pointSource) Offsets() ([]byte, error) {
	s.p.reach("barrier")
	return s.Source.Offsets()
}

func (s pointSource) Next(ctx context.Context) ([]job.Record, error) {
	recs, err := s.Source.Next(ctx)
	if errors.Is(err, io.EOF) {
		s.p.reach("eof")
	}
	return recs, err
}

// pointStore is the checkpoints' Blobstore, passing points at the writes
// of blobstorage's documented layout: "record-before" (the state is
// uploaded, the prepared record not written), "record-prepared" and
// "record-completed" (the record written, the pointers not moved),
// "acquired" (_writer written), "claim-latest" and "claim-completed"
// (the first write of each pointer: Acquire claims it for its epoch),
// then "pointer-latest" and "pointer-completed" (moved to a checkpoint);
// and "gc-delete" after each delete of a checkpoint's object.
type pointStore struct {
	blobstore.Blobstore
	p *points

	mu      sync.Mutex
	claimed map[string]bool // pointers written once (claimed) by this process
}

func (s *pointStore) put(key string, r io.Reader, put func(io.Reader) error) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	record := strings.HasPrefix(key, "checkpoints/") && strings.HasSuffix(key, "/checkpoint.json")
	var rec struct{ Status checkpoint.Status }
	if record {
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("pointStore: record %s: %w", key, err)
		}
		if rec.Status == checkpoint.StatusPrepared {
			s.p.reach("record-before")
		}
	}
	if err := put(bytes.NewReader(b)); err != nil {
		return err
	}
	switch {
	case record && rec.Status == checkpoint.StatusPrepared:
		s.p.reach("record-prepared")
	case record:
		s.p.reach("record-completed")
	case key == "_latest" || key == "_latest-completed":
		name := map[string]string{"_latest": "latest", "_latest-completed": "completed"}[key]
		s.mu.Lock()
		claim := !s.claimed[key]
		s.claimed[key] = true
		s.mu.Unlock()
		if claim {
			s.p.reach("claim-" + name)
		} else {
			s.p.reach("pointer-" + name)
		}
	case key == "_writer":
		s.p.reach("acquired")
	}
	return nil
}

func (s *pointStore) Delete(ctx context.Context, key string) error {
	if err := s.Blobstore.Delete(ctx, key); err != nil {
		return err
	}
	if strings.HasPrefix(key, "checkpoints/") || strings.HasPrefix(key, "shared/") {
		s.p.reach("gc-delete")
	}
	return nil
}

func (s *pointStore) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(key, r, func(r io.Reader) error { return s.Blobstore.Put(ctx, key, r) })
}

func (s *pointStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (etag string, err error) {
	err = s.put(key, r, func(r io.Reader) (err error) { etag, err = s.Blobstore.PutIfAbsent(ctx, key, r); return err })
	return etag, err
}

func (s *pointStore) PutIfMatch(ctx context.Context, key, match string, r io.Reader) (etag string, err error) {
	err = s.put(key, r, func(r io.Reader) (err error) { etag, err = s.Blobstore.PutIfMatch(ctx, key, match, r); return err })
	return etag, err
}

// killN records, EveryRecords 10, batches of 3: checkpoints after 12, 24,
// 36 and 48 records and a final one at 50 (ids 1…5 of a fresh job).
const killN = 50

// killSpec is one run of the job: where its bucket (a filestore), sink
// and disk are, and where the child stops.
type killSpec struct {
	Bucket, Out, Dir string
	Point            string
	Nth              int
	Freeze           bool // SIGSTOP itself at the point, rather than park for SIGKILL
}

// runKillJob runs the job of spec to its end, passing the points to p
// (nil: none). observe, if set, also hears the job's events.
func runKillJob(ctx context.Context, spec killSpec, p *points, observe func(job.Event)) (job.Result, error) {
	bucket, err := filestore.New(spec.Bucket)
	if err != nil {
		return job.Result{}, err
	}
	if err := makeFileSinkDirs(spec.Out); err != nil {
		return job.Result{}, err
	}
	cfg := job.Config{
		Storage:   blobstorage.New(&pointStore{Blobstore: bucket, p: p, claimed: map[string]bool{}}, filepath.Join(spec.Dir, "checkpoints"), blobstorage.Options{}),
		Dir:       spec.Dir,
		Source:    pointSource{Source: &source{n: killN, batch: 3}, p: p},
		Processor: summer{},
		Sink:      newFileSink(spec.Out, p.reach),
		Interval:  time.Hour, EveryRecords: 10, State: smallState,
		Observe: func(e job.Event) {
			if e.Kind == job.EventCheckpoint {
				p.reach("checkpoint-event") // the run heard of the completion
			}
			if observe != nil {
				observe(e)
			}
		},
	}
	// The Coordinator's protocol steps (persist-prepared, sink-committed,
	// persist-completed, offsets-committed): the runtime's test seam.
	cfg = job.WithHook(cfg, func(s checkpoint.Step, _ string) checkpoint.HookAction {
		p.reach(string(s))
		return checkpoint.HookContinue
	})
	return job.Run(ctx, cfg)
}

const (
	killChildEnv  = "TIDEMARK_KILL9_CHILD" // the child's killSpec, as JSON
	killPointLine = "TIDEMARK-KILL9-POINT "
	killDoneLine  = "TIDEMARK-KILL9-DONE "
)

// TestKill9Child is the child process's side: it runs the job of its
// spec and stops itself at the spec's point. Skipped unless the parent
// set killChildEnv.
func TestKill9Child(t *testing.T) {
	raw := os.Getenv(killChildEnv)
	if raw == "" {
		t.Skip("the child process of the kill -9 tests")
	}
	var spec killSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	p := &points{at: spec.Point, nth: spec.Nth, hit: func(point string) {
		fmt.Printf("%s%s #%d\n", killPointLine, point, spec.Nth)
		if spec.Freeze {
			// The whole process stops here, every goroutine with it,
			// until the parent's SIGCONT. The SIGSTOP goes to this
			// thread, which stops on its way out of the call (sent to
			// the process, another thread may take it while this one
			// goes on); the wait for SIGCONT holds this goroutine here
			// even so.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cont := make(chan os.Signal, 1)
			signal.Notify(cont, syscall.SIGCONT)
			defer signal.Stop(cont)
			if err := syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP); err != nil {
				panic(err)
			}
			<-cont
			return
		}
		for { // park until the parent's SIGKILL
			time.Sleep(time.Hour)
		}
	}}
	_, err := runKillJob(context.Background(), spec, p, nil)
	p.mu.Lock()
	seen, _ := json.Marshal(p.seen)
	p.mu.Unlock()
	fmt.Printf("%sfenced=%v passed=%s err=%v\n", killDoneLine, errors.Is(err, checkpoint.ErrFenced), seen, err)
}

// child is a running child process.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
	timer  *time.Timer
}

func startChild(t *testing.T, spec killSpec) *child {
	t.Helper()
	raw, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), killChildEnv+"="+string(raw))
	c := &child{t: t, cmd: cmd, lines: make(chan string, 16)}
	cmd.Stderr = &c.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A child that hangs is killed, and its test fails on what it lacks.
	c.timer = time.AfterFunc(45*time.Second, func() { _ = cmd.Process.Kill() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// await reads the child's output until a line starting with prefix and
// returns it; it fails the test if the child ends first.
func (c *child) await(prefix string) string {
	c.t.Helper()
	var seen []string
	for l := range c.lines {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
		seen = append(seen, l)
	}
	err := c.cmd.Wait()
	c.t.Fatalf("the child ended (%v) without %q:\n%s\n%s", err, prefix, strings.Join(seen, "\n"), c.stderr.String())
	return ""
}

// kill9 sends SIGKILL and checks that the child died of it.
func (c *child) kill9() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	for range c.lines { // drain to EOF
	}
	_ = c.cmd.Wait()
	c.timer.Stop()
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		c.t.Fatalf("the child was not killed by SIGKILL: %v\n%s", c.cmd.ProcessState, c.stderr.String())
	}
}

// awaitStopped waits until every thread of the child is stopped (its
// SIGSTOP took effect): /proc/<pid>/task/*/stat say "T".
func (c *child) awaitStopped() {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		stopped := true
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", c.cmd.Process.Pid))
		if err != nil || len(tasks) == 0 {
			c.t.Fatalf("child threads: %v", err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				stopped = false // a thread that ended meanwhile: look again
				break
			}
			// "pid (comm) state …": comm may hold anything but the last ')'.
			rest := b[bytes.LastIndexByte(b, ')')+1:]
			if f := bytes.Fields(rest); len(f) == 0 || string(f[0]) != "T" {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the child did not stop")
		}
		time.Sleep(time.Millisecond) // polling the kernel's view: no event to wait on
	}
}

// wake sends SIGCONT.
func (c *child) wake() {
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.t.Error(err)
	}
}

// finish reads the child's result line and waits for its exit.
func (c *child) finish() string {
	c.t.Helper()
	res := c.await(killDoneLine)
	for range c.lines {
	}
	err := c.cmd.Wait()
	c.timer.Stop()
	if err != nil {
		c.t.Fatalf("child: %v\n%s", err, c.stderr.String())
	}
	return res
}

// killPoint is where a child is killed: the nth pass of a point.
type killPoint struct {
	at  string
	nth int
}

func (k killPoint) String() string { return fmt.Sprintf("%s#%d", k.at, k.nth) }

// killPoints are the points of the second checkpoint, in the order a run
// passes them (from its barrier on the first one is completed: the loop
// waits for it before it cuts), then a few of the end of the job and of
// the first checkpoint.
var killPoints = []killPoint{
	{"write", 6},             // mid-transaction: the 2nd batch of checkpoint 2 (checkpoint 1 may be in flight)
	{"barrier", 2},           // in Source.Offsets, before the barrier
	{"prepare-begin", 2},     // after the state snapshot, before Sink.Prepare did anything
	{"prepare-torn", 2},      // staged bytes under a temporary name
	{"prepare-done", 2},      // output prepared, no record
	{"record-before", 2},     // state uploaded, the prepared record not written
	{"record-prepared", 2},   // prepared record written, _latest not moved
	{"pointer-latest", 2},    // _latest moved to it
	{"persist-prepared", 2},  // the Coordinator's step done: the commit decision
	{"commit-begin", 2},      // Sink.Commit called, nothing done
	{"commit-torn", 2},       // marker bytes written, not linked
	{"commit-done", 2},       // output visible, Commit not returned
	{"sink-committed", 2},    // the Coordinator's step done
	{"record-completed", 2},  // completed record written, _latest-completed not moved
	{"pointer-completed", 2}, // _latest-completed moved
	{"persist-completed", 2}, // the Coordinator's step done
	{"offsets-committed", 2}, // the Coordinator's last step
	{"checkpoint-event", 2},  // the loop heard of the completion
	{"eof", 1},               // the source ended, the final checkpoint not cut
	{"persist-prepared", 5},  // the final checkpoint's commit decision
	{"pointer-completed", 5}, // the final checkpoint completed, Run not returned
	{"gc-delete", 1},         // GC after it (GCEvery 5, Keep 3) deleted one object of checkpoint 1
	{"prepare-done", 1},      // no checkpoint yet: the first one's output prepared, no record
	{"persist-prepared", 1},  // no checkpoint completed: the first one's commit decision
}

// A real kill -9 of the job's process at every point of a checkpoint,
// then a restart on the same disk or on an empty one (a new node) with
// the same bucket and sink directory: the restart runs to the end and the
// contract-only sink's output holds every record exactly once, with the
// running total the state kept.
func TestKill9AtEveryStepExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, kp := range killPoints {
		t.Run(kp.String(), func(t *testing.T) {
			t.Parallel() // each in its own directories and processes
			base := t.TempDir()
			spec := killSpec{
				Bucket: filepath.Join(base, "bucket"), Out: filepath.Join(base, "out"),
				Dir: filepath.Join(base, "disk1"), Point: kp.at, Nth: kp.nth,
			}
			c := startChild(t, spec)
			c.await(killPointLine)
			c.kill9()

			// Both restarts from the same crash: the new node on a copy
			// of the bucket and of the sink's directory.
			newNode := killSpec{
				Bucket: filepath.Join(base, "bucket-copy"), Out: filepath.Join(base, "out-copy"),
				Dir: filepath.Join(base, "disk2"),
			}
			copyTree(t, spec.Bucket, newNode.Bucket)
			copyTree(t, spec.Out, newNode.Out)
			for _, restart := range []killSpec{{Bucket: spec.Bucket, Out: spec.Out, Dir: spec.Dir}, newNode} {
				name := map[bool]string{true: "same-disk", false: "new-node"}[restart.Dir == spec.Dir]
				t.Run(name, func(t *testing.T) {
					res, err := runKillJob(t.Context(), restart, nil, nil)
					if err != nil {
						t.Fatalf("restart: %v", err)
					}
					t.Logf("restart: %v %q, %d checkpoints", res.Action, res.Restored, res.Checkpoints)
					checkExactlyOnce(t, fileSinkOutput(t, restart.Out), killN)
				})
			}
		})
	}
}

// copyTree copies the regular files under src to dst, as a replica of a
// bucket would hold them.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kill -9 inside recovery, again and again on the same disk: after the
// record of checkpoint 2 is persisted as prepared, each next run is
// killed at its first pass of a recovery step (the roll-forward commit
// not begun, done, the promotion written), then a new node runs to the
// end: exactly once.
func TestKill9InsideRecoveryExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	base := t.TempDir()
	spec := killSpec{Bucket: filepath.Join(base, "bucket"), Out: filepath.Join(base, "out"), Dir: filepath.Join(base, "disk1")}
	for _, kp := range []killPoint{
		{"persist-prepared", 2}, // the run: checkpoint 2 prepared, not committed
		{"acquired", 1},         // a restart took the writer role, recovered nothing yet
		{"claim-completed", 1},  // …and claimed the pointers for its epoch
		{"commit-begin", 1},     // its roll-forward Commit, nothing done
		{"commit-torn", 1},      // its roll-forward Commit, marker not linked
		{"commit-done", 1},      // rolled forward, the record still prepared
		{"record-completed", 1}, // the record promoted, _latest-completed not moved
	} {
		spec.Point, spec.Nth = kp.at, kp.nth
		c := startChild(t, spec)
		if at := c.await(killPointLine); !strings.HasPrefix(at, kp.at) {
			t.Fatalf("stopped at %s, want %s", at, kp)
		}
		c.kill9()
		t.Logf("killed at %s", kp)
		if kp.at != "record-completed" { // the roll-forward has not promoted it yet
			bucket, err := filestore.New(spec.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			latest, err := blobstorage.New(bucket, t.TempDir(), blobstorage.Options{}).Load(t.Context())
			if err != nil || latest == nil || latest.ID != checkpoint.NewID(2) || latest.Completed() {
				t.Fatalf("after the kill at %s the latest record is %+v (%v), want checkpoint 2 prepared", kp, latest, err)
			}
		}
	}
	spec.Dir = filepath.Join(base, "disk2")
	res, err := runKillJob(t.Context(), spec, nil, nil)
	if err != nil {
		t.Fatalf("new node: %v", err)
	}
	t.Logf("new node: %v %q, %d checkpoints", res.Action, res.Restored, res.Checkpoints)
	checkExactlyOnce(t, fileSinkOutput(t, spec.Out), killN)
}

// snapshotFiles returns every file under dir with its size and mtime,
// but those under a directory named skip.
func snapshotFiles(t *testing.T, dir, skip string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == skip {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A writer process frozen (SIGSTOP) inside the two-phase window — its
// output prepared but no record, its state uploaded or its record
// written but _latest not moved to it, its record prepared but not
// committed (the window proper), mid-commit, committed but not completed,
// completed but _latest-completed not moved — while a new node takes
// over (the frozen one still holds its disk: a restart there is
// refused) and replays to the end; then the frozen one is woken
// (SIGCONT): after the new node finished, as soon as it took the writer
// role (its roll-forward Commit then races the zombie's), or as soon as
// it recovered. The output holds every record exactly once; the zombie
// stops fenced, and, woken after the end, changes neither the bucket nor
// the sink's files.
func TestKill9FrozenWriterWokenAfterTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for _, kp := range []killPoint{
		{"prepare-done", 2},
		{"record-before", 2},   // its state uploaded: woken, it writes its record
		{"record-prepared", 2}, // its record written, _latest not moved: the new node uses the id
		{"persist-prepared", 2},
		{"commit-torn", 2},
		{"sink-committed", 2},
		{"record-completed", 2},
	} {
		for _, wake := range []string{"after", "at-takeover", "during"} {
			t.Run(kp.String()+"/wake-"+wake, func(t *testing.T) {
				t.Parallel() // each in its own directories and processes
				base := t.TempDir()
				spec := killSpec{
					Bucket: filepath.Join(base, "bucket"), Out: filepath.Join(base, "out"),
					Dir: filepath.Join(base, "diskA"), Point: kp.at, Nth: kp.nth, Freeze: true,
				}
				z := startChild(t, spec)
				z.await(killPointLine)
				z.awaitStopped()

				if _, err := runKillJob(t.Context(), spec, nil, nil); !errors.Is(err, job.ErrDirLocked) {
					t.Fatalf("a restart on the frozen writer's disk: %v, want ErrDirLocked", err)
				}
				specB := spec
				specB.Dir = filepath.Join(base, "diskB")
				var observe func(job.Event)
				var pb *points
				switch wake {
				case "at-takeover": // node B holds the role, has not rolled forward
					pb = &points{at: "claim-completed", nth: 1, hit: func(string) { z.wake() }}
				case "during": // node B recovered, reads on
					observe = func(e job.Event) {
						if e.Kind == job.EventStart {
							z.wake()
						}
					}
				}
				res, err := runKillJob(t.Context(), specB, pb, observe)
				if err != nil {
					t.Fatalf("node B: %v", err)
				}
				t.Logf("node B: %v %q, %d checkpoints", res.Action, res.Restored, res.Checkpoints)
				checkExactlyOnce(t, fileSinkOutput(t, spec.Out), killN)

				var bucket, out map[string]string
				if wake == "after" {
					bucket, out = snapshotFiles(t, spec.Bucket, ""), snapshotFiles(t, spec.Out, "tmp")
					z.wake()
				}
				got := z.finish()
				if !strings.HasPrefix(got, "fenced=true ") {
					t.Errorf("the zombie ended %s, want fenced", got)
				}
				t.Logf("zombie: %s", got)
				if kp.at == "persist-prepared" || kp.at == "commit-torn" {
					// Woken inside the window, the zombie commits the
					// same transaction recovery rolled forward (the
					// contract): Commit ran to its end in the zombie
					// for checkpoint 2, and changed nothing (above).
					var passed struct {
						Done int `json:"commit-done"`
					}
					if _, js, ok := strings.Cut(got, "passed="); !ok {
						t.Errorf("no points in %q", got)
					} else if err := json.NewDecoder(strings.NewReader(js)).Decode(&passed); err != nil {
						t.Errorf("points in %q: %v", got, err)
					} else if passed.Done < kp.nth {
						t.Errorf("the zombie's late Commit of checkpoint %d never completed (%d commits)", kp.nth, passed.Done)
					}
				}
				if wake == "after" {
					if after := snapshotFiles(t, spec.Bucket, ""); !maps.Equal(bucket, after) {
						t.Errorf("the zombie changed the bucket:\nbefore %v\nafter  %v", bucket, after)
					}
					if after := snapshotFiles(t, spec.Out, "tmp"); !maps.Equal(out, after) {
						t.Errorf("the zombie changed the sink's files:\nbefore %v\nafter  %v", out, after)
					}
				}
				checkExactlyOnce(t, fileSinkOutput(t, spec.Out), killN)
			})
		}
	}
}
