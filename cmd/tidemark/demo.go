package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/metrics"
)

// defaultDemoDir is the demo's default working directory.
const defaultDemoDir = ".tidemark"

// defaultSlow paces the default run (200 batches of 1000 records) to about
// ten seconds and five checkpoints: long enough to watch it and to crash
// it by hand. At full speed it ends within a second or two.
const defaultSlow = 50 * time.Millisecond

type demoFlags struct {
	dir         string
	records     uint64
	words       int
	interval    time.Duration
	every       uint64
	keep        int
	crashAfter  uint64
	slow        time.Duration
	batch       int
	concurrency int
	outage      time.Duration
	metricsAddr string
	remoteState string
	// remoteStateSet: --remote-state was given (its value may be empty).
	remoteStateSet bool
	// source is --source: a JetStream stream as input (empty: generated).
	source string
	workersFlags
	stopFlags
}

// defaultOutage is how long a store outage the demo rides through.
const defaultOutage = 30 * time.Second

// rideThrough returns storeURL set to retry every request of an S3 store
// through an outage of up to d (unless the URL sets its own retry budget):
// attempts without a limit, within an operation deadline of 1.5 d. The
// job then waits a short outage out instead of failing its checkpoint;
// exactly-once holds either way (a checkpoint that fails is abandoned and
// its transaction aborted, as after a crash). Other stores are returned
// as they are: a filesystem has no outage to ride.
func rideThrough(storeURL string, d time.Duration) (string, error) {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "s3" || d <= 0 {
		return storeURL, nil
	}
	q := u.Query()
	if q.Has("max_attempts") || q.Has("operation_timeout") {
		return storeURL, nil
	}
	withParam(u, "max_attempts", "-1")
	withParam(u, "operation_timeout", (d * 3 / 2).String())
	return u.String(), nil
}

func (a *app) demoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the word-count demo job: checkpoints, crash, resume, exactly-once",
		Long: `demo runs a keyed-aggregation job: word counts over a generated, replayable
source of --records records, with the counts in Pebble state, checkpoints through
the two-phase protocol (state and offsets persisted as prepared, sink transaction
committed, checkpoint completed) every --interval, and a transactional file sink.

Checkpoints go to the store (default: file://<dir>/store, a directory that behaves
like a bucket; or --store s3://…; unlike the operator commands the demo never
reads $TIDEMARK_STORE, since it takes the writer role), the live state to
<dir>/live. On start the job
checks that the store enforces conditional writes (as tidemark probe does; it
refuses to run on an endpoint that ignores them), takes the writer role (fencing
any previous writer), recovers the latest completed checkpoint (promoting a
prepared one whose sink transaction committed), downloads its state if this node
does not have it, and continues from its offsets.

SIGTERM stops it cleanly: it reads no more records, takes a final checkpoint of
what it read, commits it, (with --savepoint-on-stop LABEL) archives it as a
savepoint, and exits 0, all within --stop-timeout (default 25s, inside the 30 s
grace period of Kubernetes). A second signal, or the timeout, stops it as a crash
would (exit 143): nothing is lost either way, the next run resumes from the last
completed checkpoint. With --workers the coordinator drains and its workers
save their parts of the final checkpoint (a worker that gets SIGTERM itself keeps
serving its coordinator for its own --stop-timeout). Ctrl-C (SIGINT) is not a
clean stop: it stops at once, as a crash would (exit 130).

Kill it at any moment (Ctrl-C, kill -9, --crash-after-records) and run the same
command again: it resumes, and at the end it checks that the committed output
holds every record exactly once, says so, and exits 3 if not. To play a fresh
node with an empty disk, give another, empty --dir and the same --store (the
default store is inside --dir, so deleting <dir> would start a new job).

With --remote-state (all levels; --remote-state=lower: L5 and L6 only) the
state's tables are created in the store itself (under remote/) and checkpoints
reference them instead of uploading them: a resume on an empty node downloads
only the small local part, opens at once and reads the rest on demand (hydrating
its cache in the background). A job in remote state must be resumed with the
flag (without it the run is refused before it changes anything); a job started
without it can be resumed with it.

A job resumed from a savepoint restored out of another store (savepoint create on
one store, savepoint cp to another, savepoint restore there, then demo there) is
checked for what this store holds: its state against every record, its committed
output against the records from the savepoint on (the output before it is in the
store the savepoint came from). The verdict says so, and the store keeps that
offset in demo/base for later runs.`,
		Example: `  tidemark demo                                   # 200000 records into ./.tidemark
  tidemark demo --crash-after-records 120000      # dies (exit 137) mid-run ...
  tidemark demo                                   # ... and resumes: exactly-once: OK
  tidemark demo --slow 0                          # full speed
  tidemark demo --slow 200ms                      # slow enough to kill its container by hand
  tidemark demo --dir /tmp/node2 --store file://$PWD/.tidemark/store   # another node
  tidemark demo --remote-state                    # tables in the store: instant resume
  tidemark demo --store 's3://tidemark/wordcount?endpoint=http://127.0.0.1:9000&path_style=true'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.remoteStateSet = cmd.Flags().Changed("remote-state")
			return a.runDemo(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	// The demo's own --store (it shadows the global one, which would say
	// it defaults to $TIDEMARK_STORE; the demo never reads that).
	fl.StringVar(&a.store, "store", "", "store URL (default file://<dir>/store; the demo ignores $"+storeEnv+")")
	fl.StringVar(&f.dir, "dir", defaultDemoDir, "local working directory (live state, local copies of checkpoints)")
	fl.Uint64Var(&f.records, "records", demo.DefaultRecords, "number of records of the source")
	fl.IntVar(&f.words, "words", demo.DefaultWords, "vocabulary size of the source")
	fl.DurationVar(&f.interval, "interval", demo.DefaultInterval, "time between checkpoints")
	fl.Uint64Var(&f.every, "checkpoint-every", 0, "also checkpoint every N records (0: by --interval only)")
	fl.IntVar(&f.keep, "keep", blobstorage.DefaultKeep, "completed checkpoints to keep in the store (older ones are garbage-collected)")
	fl.Uint64Var(&f.crashAfter, "crash-after-records", 0, "crash (exit 137, no cleanup) when the source offset reaches N, once per store: the same command run again resumes and completes")
	fl.DurationVar(&f.slow, "slow", defaultSlow, "sleep this long after each batch, to leave time to kill the job (0: full speed)")
	fl.IntVar(&f.batch, "batch", demo.DefaultBatch, "records per batch")
	fl.IntVar(&f.concurrency, "concurrency", blobstorage.DefaultConcurrency, "parallel uploads and downloads (0: the default)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (for example 127.0.0.1:9464; empty: none)")
	fl.StringVar(&f.remoteState, "remote-state", "", "keep the state's tables in the store (instant restore: a resume opens at once and reads on demand): all (every level) or lower (L5 and L6); --remote-state alone means all (an empty value is refused). A job in remote state cannot resume without it")
	fl.Lookup("remote-state").NoOptDefVal = demo.RemoteStateAll
	fl.DurationVar(&f.outage, "outage-tolerance", defaultOutage, "ride through an S3 store outage this long: requests are retried instead of failing the checkpoint (0: the store URL's own retry budget)")
	fl.StringVar(&f.source, "source", "", sourceHelp)
	a.addWorkersFlags(cmd, &f.workersFlags)
	addStopFlags(cmd, &f.stopFlags)
	cmd.AddCommand(a.demoProduceCmd())
	return cmd
}

// demoStoreURL returns the store URL of the demo: --store, else
// file://<abs dir>/store. Unlike the operator commands it does not read
// $TIDEMARK_STORE: the demo takes the writer role of its store, and a
// variable exported for ls or gc must not make a replayed quick start
// fence the job running there.
func (a *app) demoStoreURL(dir string) (string, error) {
	if a.store != "" {
		return a.store, nil
	}
	abs, err := filepath.Abs(filepath.Join(dir, "store"))
	if err != nil {
		return "", err
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

func (a *app) runDemo(ctx context.Context, f demoFlags) error {
	if f.dir == "" {
		return usagef("demo: --dir must not be empty (default %s)", defaultDemoDir)
	}
	// Each flag that is wrong is named alone, with its value.
	for _, c := range []struct {
		flag  string
		bad   bool
		want  string
		value any
	}{
		{"--records", f.records == 0, "be positive", f.records},
		{"--words", f.words <= 0, "be positive", f.words},
		{"--batch", f.batch <= 0, "be positive", f.batch},
		{"--interval", f.interval <= 0, "be positive", f.interval},
		{"--keep", f.keep <= 0, "be positive", f.keep},
		{"--concurrency", f.concurrency < 0, "not be negative", f.concurrency},
		{"--slow", f.slow < 0, "not be negative", f.slow},
		{"--outage-tolerance", f.outage < 0, "not be negative", f.outage},
	} {
		if c.bad {
			return usagef("demo: %s must %s, not %v", c.flag, c.want, c.value)
		}
	}
	if f.remoteStateSet && f.remoteState == "" {
		return usagef("demo: --remote-state= has an empty value: want all or lower (leave the flag out for state on local disk)")
	}
	if _, _, err := demo.ParseRemoteState(f.remoteState); err != nil {
		return usagef("demo: --remote-state=%s: want all or lower", f.remoteState)
	}
	if f.source != "" {
		if _, err := parseSource(f.source); err != nil {
			return err
		}
		if f.workers > 0 || f.remoteStateSet {
			return usagef("demo: --source runs in one process with state on local disk for now: leave out --workers and --remote-state")
		}
	}
	if f.crashAfter > f.records && f.source == "" {
		return usagef("demo: --crash-after-records %d is past the end of the source (--records %d): it would never crash", f.crashAfter, f.records)
	}
	if f.metricsAddr != "" {
		if err := checkListenAddr("--metrics-addr", f.metricsAddr, "127.0.0.1:9464"); err != nil {
			return err
		}
	}
	if err := f.workersFlags.check(f.every, a.env.getenv); err != nil {
		return err
	}
	if err := f.stopFlags.check(); err != nil {
		return err
	}
	// The input stream is checked before anything changes.
	var src demo.NATS
	if f.source != "" {
		n, closeSource, err := a.openSource(ctx, f.source)
		if err != nil {
			return err
		}
		defer closeSource()
		src = n
	}
	// The metrics address is bound before --dir is created: a port in
	// use must leave nothing behind. The families exist from the start,
	// at 0; the store is observed once it is open.
	var bm *metrics.BlobstoreMetrics
	var cm *metrics.CheckpointMetrics
	var metricsURL string
	if f.metricsAddr != "" {
		reg := metrics.NewRegistry()
		var err error
		if bm, err = metrics.NewBlobstoreMetrics(reg, metrics.BlobstoreOptions{KeyClass: blobstorage.KeyClass, KeyClasses: blobstorage.KeyClasses}); err != nil {
			return err
		}
		if cm, err = metrics.NewCheckpointMetrics(reg); err != nil {
			return err
		}
		srv, err := metrics.Start(ctx, f.metricsAddr, reg)
		if err != nil {
			return fmt.Errorf("demo: --metrics-addr: %w", err)
		}
		defer srv.Close()
		metricsURL = srv.URL()
	}
	// Before anything opens the store (the default one is inside the
	// dir) or writes a local file: a second demo on this dir would
	// corrupt the first one's live state and checkpoints.
	unlock, err := lockDemoDir(f.dir)
	if err != nil {
		return err
	}
	defer unlock()
	storeURL, err := a.demoStoreURL(f.dir)
	if err != nil {
		return err
	}
	openURL, err := rideThrough(storeURL, f.outage)
	if err != nil {
		return err
	}
	raw, err := openStoreURL(ctx, storeURL, openURL)
	if err != nil {
		return err
	}
	if err := refuseTakenLabel(ctx, f.stopFlags, raw); err != nil {
		return err
	}
	stderr := a.env.stderr
	// Progress always goes to stderr, so that stdout holds only the
	// result (one line, or JSON with --output json).
	say := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	opts := blobstorage.Options{Keep: f.keep, Concurrency: f.concurrency, Logger: a.logger}
	if bm != nil {
		raw, opts.Observer = bm.Wrap(raw), cm
		say("metrics at %s", metricsURL)
	}
	up := &uploads{}
	bs := blobstore.Observe(raw, up)
	storage := blobstorage.New(bs, filepath.Join(f.dir, "checkpoints"), opts)
	start := time.Now()
	cfg := demo.Config{
		Storage:       storage,
		Sink:          demo.NewSink(bs),
		Dir:           f.dir,
		Records:       f.records,
		Words:         f.words,
		Batch:         f.batch,
		Interval:      f.interval,
		EveryRecords:  f.every,
		RemoteState:   f.remoteState,
		Logger:        a.logger,
		Stop:          a.stopOn(f.stopFlags),
		StopSavepoint: f.savepoint,
	}
	faults := demofault.Faults{Slow: f.slow, CrashAfter: f.crashAfter}
	if f.crashAfter > 0 && a.env.crash != nil {
		faults.Crash = func() {
			fmt.Fprintf(stderr, "tidemark demo: crashing now at record %d (--crash-after-records): exit %d, no cleanup\n", f.crashAfter, exitCrashed)
			a.env.crash()
		}
	}
	cfg.Progress = func(p demo.Progress) {
		switch p.Event {
		case "start":
			say("tidemark demo: word count over %d records, store %s, local dir %s, %s", p.Records, storeURL, f.dir, stateMode(f.remoteState))
			if p.From == "" {
				say("starting fresh (no completed checkpoint in the store)")
			} else {
				how := ""
				if p.Action != "" {
					how = " (" + p.Action + ")"
				}
				say("resumed from checkpoint %s%s at record %d", p.From, how, p.Offset)
			}
			if p.Offset < p.Records { // a finished job only checks: nothing to crash
				say("to crash and resume: press Ctrl-C or `kill -9 %d` (or pass --crash-after-records N), then run the same command again", os.Getpid())
				say("to stop cleanly instead: `kill -TERM %d` drains, takes a final checkpoint and exits 0 within --stop-timeout %v", os.Getpid(), f.stopTimeout)
			}
		case "records", "checkpoint":
			say("records %d/%d (%.0f%%)  checkpoints %d (last %s)  uploaded %s in %s",
				p.Offset, p.Records, 100*float64(p.Offset)/float64(max(p.Records, 1)),
				p.Checkpoints, orNone(p.LastCompleted), humanBytes(up.bytes.Load()), plural(up.objects.Load(), "object"))
		}
	}

	if f.source != "" {
		return a.runDemoSource(ctx, f, cfg, faults, src, storeURL, up, start, say, storage)
	}
	if f.workers > 0 {
		return a.runDemoWorkers(ctx, f, cfg, faults, openURL, storeURL, up, start)
	}
	res, err := demo.Run(demofault.With(ctx, faults), cfg)
	upBytes, upObjects := up.bytes.Load(), up.objects.Load()
	summary := demoSummary(storeURL, f.dir, res, upBytes, upObjects, start)
	summary["remote_state"] = f.remoteState
	if err == nil && res.Stopped {
		return a.finishStop(f, res, summary, say)
	}
	return a.finishDemo(ctx, res, err, summary, say, func() {
		say("done in %s: %s this run, %s uploaded in %s",
			time.Since(start).Round(time.Millisecond), plural(res.Checkpoints, "checkpoint"), humanBytes(upBytes), plural(upObjects, "object"))
	}, latestCompletedOf(storage))
}

// latestCompletedOf returns a lookup of the latest completed checkpoint
// of storage, for storeLastCompleted: the pointer alone where the
// storage can read it, else the record it names.
func latestCompletedOf(storage checkpoint.Storage) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if p, ok := storage.(*blobstorage.Storage); ok {
			return p.PointerID(ctx, blobstorage.PointerLatestCompleted)
		}
		cp, err := storage.LoadLatestCompleted(ctx)
		if err != nil || cp == nil {
			return "", err
		}
		return cp.ID, nil
	}
}

// demoSummary is what the JSON summary of every demo run holds; the
// caller adds what its kind of run has.
func demoSummary(storeURL, dir string, res demo.Result, upBytes, upObjects int64, start time.Time) map[string]any {
	return map[string]any{
		"store":            storeURL,
		"dir":              dir,
		"action":           res.Action.String(),
		"restored":         res.RestoredID,
		"abandoned":        res.Abandoned,
		"start_offset":     res.StartOffset,
		"end_offset":       res.EndOffset,
		"checkpoints":      res.Checkpoints,
		"last_checkpoint":  res.LastID,
		"uploaded_bytes":   upBytes,
		"uploaded_objects": upObjects,
		"seconds":          time.Since(start).Seconds(),
	}
}

// finishDemo reports how a demo run ended: the exactly-once check (text,
// or JSON with summary), then done; an interruption once; a fenced run
// with what to do. lastCompleted reads the store's latest completed
// checkpoint, for a run stopped before it learned it.
func (a *app) finishDemo(ctx context.Context, res demo.Result, err error, summary map[string]any, say func(string, ...any), done func(), lastCompleted func(context.Context) (string, error)) error {
	switch {
	case err == nil || errors.Is(err, demo.ErrNotExactlyOnce):
		summary["exactly_once"] = res.Check.OK()
		summary["records"] = res.Check.Records
		summary["words"] = res.Check.Words
		summary["transactions"] = res.Check.Transactions
		// Committed transactions of lineages abandoned by a rollback to a
		// savepoint on this store: their output the checked lineage
		// produced again, so they are not counted.
		summary["abandoned_lineage_transactions"] = res.Check.Abandoned
		// The records this store's committed output must hold, from
		// output_from on: 0, or the offset of a savepoint restored here
		// from another store (whose sink holds the output before it).
		summary["output_from"] = res.Check.Base.Offset
		summary["output_from_savepoint"] = res.Check.Base.Checkpoint
		summary["check"] = res.Check.String()
		a.emit(summary, func(w io.Writer) { fmt.Fprintln(w, res.Check.String()) })
		if err != nil {
			return fmt.Errorf("demo: %w", errVerify)
		}
		done()
		return nil
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errTimedOut):
		// --timeout, not a signal: say which, keeping the resume hint.
		cause := context.Cause(ctx)
		say("%v at record %d; the last completed checkpoint is %s. Run the same command again to resume.",
			cause, res.EndOffset, storeLastCompleted(ctx, res.LastID, lastCompleted))
		return quietError{cause}
	case ctx.Err() != nil:
		say("interrupted at record %d; the last completed checkpoint is %s. Run the same command again to resume.",
			res.EndOffset, storeLastCompleted(ctx, res.LastID, lastCompleted))
		return errInterrupted
	case errors.Is(err, checkpoint.ErrFenced):
		return fencedError{err}
	}
	return err
}

// fencedError says once that another process took over the job: the
// layers under the demo each say it in their words, three times in all.
type fencedError struct{ err error }

func (e fencedError) Error() string {
	return "fenced: another process took over this store's job; this one stopped without touching it (stop one of them)"
}
func (e fencedError) Unwrap() error { return e.err }

// lockDemoDir takes the lock of a demo's (or a worker's) --dir
// (demo.LockDir), saying what to do when another process holds it.
func lockDemoDir(dir string) (func(), error) {
	unlock, err := demo.LockDir(dir)
	var le *demo.DirLockedError
	if errors.As(err, &le) {
		pid := "pid unknown"
		if le.PID > 0 {
			pid = fmt.Sprintf("pid %d", le.PID)
		}
		return nil, fmt.Errorf("another tidemark process is using --dir %s (%s); wait for it to end or use another --dir", dir, pid)
	}
	return unlock, err
}

// errInterrupted is the error of a demo stopped by Ctrl-C or SIGTERM
// (exit 130, 143): the demo has said so already, so it is not printed
// again (see quietError).
var errInterrupted error = quietError{fmt.Errorf("interrupted: %w", context.Canceled)}

// lastCompletedLookup bounds the read of the store's latest completed
// checkpoint after an interruption: the store may be what stalled.
const lastCompletedLookup = 3 * time.Second

// storeLastCompleted names the last completed checkpoint for the message
// of an interrupted run: the run's own, else the store's. A run stopped
// early (waiting for a lock, say) knows none, but the store may hold
// some: it is read, under a short deadline, never misstated as none.
func storeLastCompleted(ctx context.Context, runs string, lookup func(context.Context) (string, error)) string {
	if runs != "" || lookup == nil {
		return orNone(runs)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastCompletedLookup)
	defer cancel()
	id, err := lookup(ctx)
	if err != nil {
		return "unknown (the store did not say: " + err.Error() + ")"
	}
	return orNone(id)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return strings.TrimSpace(s)
}

// stateMode describes --remote-state for the start line.
func stateMode(remote string) string {
	if remote == demo.RemoteStateOff {
		return "state on local disk"
	}
	return "state in the store (--remote-state=" + remote + ")"
}
