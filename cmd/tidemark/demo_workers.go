package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"

	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/metrics"
)

// workersFlags are the demo's flags of a job with workers.
type workersFlags struct {
	workers         int
	listen          string
	killWorkerAfter uint64
	workerTimeout   time.Duration
	joinTimeout     time.Duration
}

// addWorkersFlags registers the flags of a job with workers on the demo
// command, and its hidden worker subcommand.
func (a *app) addWorkersFlags(cmd *cobra.Command, f *workersFlags) {
	fl := cmd.Flags()
	fl.IntVar(&f.workers, "workers", 0, "run the job as N worker processes holding the state and this process as their coordinator (1 to "+strconv.Itoa(demo.DefaultOwners)+", the job's owners; 0: one process); a resumed job may use another N")
	fl.StringVar(&f.listen, "worker-listen", "", "with --workers: start no workers, wait on this address (for example :7070) for the N workers to connect, each started as: tidemark demo worker --coordinator HOST:PORT --slot K (set $"+workerTokenEnv+" to the same secret for both, or any process that reaches the address can join)")
	fl.Uint64Var(&f.killWorkerAfter, "kill-worker-after-records", 0, "with --workers: kill worker 0 (SIGKILL) when the source offset reaches N, once per store; the coordinator replaces it")
	fl.DurationVar(&f.workerTimeout, "worker-timeout", demo.DefaultWorkerTimeout, "with --workers: a worker that does not answer a request within this long is replaced")
	fl.DurationVar(&f.joinTimeout, "worker-join-timeout", demo.DefaultJoinTimeout, "with --workers: how long to wait for the workers to connect")
	_ = fl.MarkHidden("kill-worker-after-records")
	cmd.AddCommand(a.demoWorkerCmd())
}

func (f workersFlags) check() error {
	switch {
	case f.workers < 0:
		return usagef("demo: --workers must not be negative")
	case f.workers > demo.DefaultOwners:
		return usagef("demo: --workers %d: the job has %d owners (partitions of the state), so at most %d workers", f.workers, demo.DefaultOwners, demo.DefaultOwners)
	case f.workers == 0 && (f.listen != "" || f.killWorkerAfter > 0):
		return usagef("demo: %s --workers", needWorkers(f))
	case f.listen != "" && f.killWorkerAfter > 0:
		return usagef("demo: --kill-worker-after-records kills a worker this process started: not with --worker-listen")
	case f.workerTimeout <= 0 || f.joinTimeout <= 0:
		return usagef("demo: --worker-timeout and --worker-join-timeout must be positive")
	case f.listen != "":
		return checkListenAddr("--worker-listen", f.listen, ":7070")
	}
	return nil
}

// demoWorkerCmd is `tidemark demo worker`: one worker of a job whose
// coordinator is `tidemark demo --workers N`.
func (a *app) demoWorkerCmd() *cobra.Command {
	var coord, dir, metricsAddr string
	var slot int
	var stopTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run one worker of `tidemark demo --workers N`",
		Long: `worker connects to the coordinator of a demo job run with --workers, holds the
state of the owners the coordinator assigns to it, and saves them as its part of
every checkpoint, in the store the coordinator names. A coordinator started
without --worker-listen starts its workers itself.

--coordinator is HOST:PORT; a worker retries a coordinator that does not listen
yet for a minute, saying so. A worker started for a slot that has a live worker
is told so and waits as that slot's standby: it takes over if the live worker
is lost. --dir is locked while the worker runs: one worker per directory.`,
		Example: `  tidemark demo --workers 3 --worker-listen :7070 --store s3://…   # the coordinator
  tidemark demo worker --coordinator coordinator:7070 --slot 0 --dir /work/node`,
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if coord == "" || slot < 0 || dir == "" {
				return usagef("demo worker: --coordinator, --slot (≥ 0) and --dir are required")
			}
			if err := checkHostPort(coord); err != nil {
				return usagef("demo worker: --coordinator %s: %v", coord, err)
			}
			if metricsAddr != "" {
				if err := checkListenAddr("--metrics-addr", metricsAddr, "127.0.0.1:9464"); err != nil {
					return err
				}
			}
			cfg := demo.WorkerConfig{
				Coordinator: coord,
				Slot:        slot,
				Dir:         dir,
				Token:       a.env.getenv(workerTokenEnv),
				Logger:      a.logger,
				Notify:      func(msg string) { fmt.Fprintf(a.env.stderr, "tidemark demo worker (slot %d): %s\n", slot, msg) },
			}
			// The metrics address is bound before --dir is created: a
			// port in use must leave nothing behind.
			if metricsAddr != "" {
				stop, err := a.serveWorkerMetrics(cmd.Context(), metricsAddr, &cfg)
				if err != nil {
					return fmt.Errorf("demo worker: --metrics-addr: %w", err)
				}
				defer stop()
			}
			unlock, err := lockDemoDir(dir)
			if err != nil {
				return err
			}
			defer unlock()
			// SIGTERM lets the worker serve on for up to --stop-timeout:
			// its coordinator, draining on the same signal, still needs
			// its part of the final checkpoint, then tells it to stop.
			if a.env.terminate != nil {
				a.env.terminate(stopTimeout)
			}
			err = demo.ServeWorker(cmd.Context(), cfg)
			if err != nil && cmd.Context().Err() != nil && errors.Is(err, context.Canceled) {
				// Interrupted (Ctrl-C reaches the coordinator and the
				// workers it started alike): the coordinator says so.
				return quietError{err}
			}
			return err
		},
	}
	hideIgnoredGlobalFlags(cmd, "store", "output", "progress")
	fl := cmd.Flags()
	fl.StringVar(&coord, "coordinator", "", "the coordinator's address for workers, HOST:PORT")
	fl.IntVar(&slot, "slot", -1, "the worker's slot, 0 … N-1")
	fl.StringVar(&dir, "dir", "", "local working directory of the worker (should be empty)")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "serve the worker's Prometheus metrics (its parts, restores and store operations) at http://ADDR/metrics (empty: none)")
	fl.DurationVar(&stopTimeout, "stop-timeout", defaultStopTimeout, "on SIGTERM, keep serving the coordinator (which drains) up to this long, then stop (exit 143)")
	return cmd
}

// hideIgnoredGlobalFlags keeps the global flags names out of cmd's help:
// a worker is told its store by the coordinator and prints no report.
// The flags are shared with every command, so they are hidden only while
// cmd's help is written.
func hideIgnoredGlobalFlags(cmd *cobra.Command, names ...string) {
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		var hidden []*pflag.Flag
		for _, n := range names {
			if f := c.InheritedFlags().Lookup(n); f != nil && !f.Hidden {
				f.Hidden = true
				hidden = append(hidden, f)
			}
		}
		defer func() {
			for _, f := range hidden {
				f.Hidden = false
			}
		}()
		c.Parent().HelpFunc()(c, args)
	})
}

// checkHostPort checks a worker's --coordinator: HOST:PORT with a port
// number (the host may be empty: this host).
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want HOST:PORT, for example coordinator:7070")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q: want a number, 1 to 65535", port)
	}
	return nil
}

// serveWorkerMetrics serves the metrics of the worker of cfg at addr: its
// store operations (cfg.Open wraps the store it opens) and its parts and
// restores (cfg.Observer). stop ends the server.
func (a *app) serveWorkerMetrics(ctx context.Context, addr string, cfg *demo.WorkerConfig) (stop func(), err error) {
	reg := metrics.NewRegistry()
	bm, err := metrics.NewBlobstoreMetrics(reg, metrics.BlobstoreOptions{KeyClass: blobstorage.KeyClass, KeyClasses: blobstorage.KeyClasses})
	if err != nil {
		return nil, err
	}
	cm, err := metrics.NewCheckpointMetrics(reg)
	if err != nil {
		return nil, err
	}
	cfg.Observer = cm
	cfg.Open = func(ctx context.Context, u string) (blobstore.Blobstore, error) {
		bs, err := blobstore.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		return bm.Wrap(bs), nil
	}
	srv, err := metrics.Start(ctx, addr, reg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(a.env.stderr, "metrics at %s\n", srv.URL())
	return func() { _ = srv.Close() }, nil
}

// runDemoWorkers runs the demo job of cfg with f.workers workers; the
// rest of the demo's setup is runDemo's.
func (a *app) runDemoWorkers(ctx context.Context, f demoFlags, cfg demo.Config, faults demofault.Faults, openURL, storeURL string, up *uploads, start time.Time) error {
	w := f.workersFlags
	stderr := &syncWriter{w: a.env.stderr}
	say := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	faults.KillWorkerAfter = w.killWorkerAfter
	listen := w.listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("demo: listen for workers: %w", err)
	}
	wc := demo.WorkersConfig{
		Config:        cfg,
		Workers:       w.workers,
		Listener:      l,
		StoreURL:      openURL,
		Concurrency:   f.concurrency,
		WorkerTimeout: w.workerTimeout,
		JoinTimeout:   w.joinTimeout,
		Token:         a.env.getenv(workerTokenEnv),
	}
	if w.listen == "" {
		exe, err := os.Executable()
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("demo: find this executable to start workers: %w", err)
		}
		// Once the run is interrupted, what the children say (the
		// coordinator gone, as they see it) is noise: the coordinator
		// says once that the job was interrupted and how to resume.
		out := &untilDone{ctx: ctx, w: stderr}
		if wc.Token == "" {
			// The workers are this process's children: a token made
			// up here keeps any other local process out of the job.
			wc.Token = rand.Text()
		}
		cl := &childLauncher{exe: exe, base: filepath.Join(f.dir, "workers"), out: out, procs: map[int]*child{},
			args: []string{"--log-level", a.logLevel, "--log-format", a.logFormat, "--stop-timeout", f.stopTimeout.String()}, token: wc.Token}
		defer cl.close()
		wc.Launcher = cl
	}
	wc.OnWorker = func(e demo.WorkerEvent) {
		switch e.Event {
		case "waiting":
			// Said once the job passed its checks: a refused run never
			// waited for anyone.
			if w.listen != "" {
				say("waiting up to %v for %s on %s (tidemark demo worker --coordinator %s --slot K)", w.joinTimeout, plural(w.workers, "worker"), l.Addr(), workerAddr(l.Addr()))
				if wc.Token == "" {
					say("warning: $%s is not set: any process that reaches %s can join this job as a worker", workerTokenEnv, l.Addr())
				}
			}
		case "joined":
			say("worker %d joined: %s", e.Slot, e.Worker)
		case "standby":
			say("a worker for slot %d connected (%s) while the slot has a live worker (%s): keeping it as its standby (it takes over if that worker is lost)", e.Slot, e.Worker, e.Live)
		case "refused":
			still := ""
			if len(e.Missing) > 0 {
				still = "; still waiting for " + slotsOf(e.Missing)
			}
			say("refused a worker that connected: %v%s", e.Err, still)
		case "lost":
			next := fmt.Sprintf("starting a new worker for slot %d", e.Slot)
			switch {
			case e.Standby != "":
				next = fmt.Sprintf("its standby %s takes over", e.Standby)
			case w.listen != "":
				next = fmt.Sprintf("waiting up to %v (--worker-join-timeout) for a new worker of slot %d: start one with tidemark demo worker --coordinator %s --slot %d",
					w.joinTimeout, e.Slot, workerAddr(l.Addr()), e.Slot)
			}
			say("worker %d (%s) lost: %v; abandoning the checkpoint in flight, %s", e.Slot, e.Worker, e.Err, next)
		case "opened":
			from := "empty"
			switch {
			case e.Checkpoint != "" && len(e.Downloaded) > 0:
				from = "restored from the store, checkpoint " + e.Checkpoint
			case e.Checkpoint != "":
				from = "from its own disk, checkpoint " + e.Checkpoint
			}
			say("worker %d (%s): owners %s, %s", e.Slot, e.Worker, strings.Join(e.Owners, ","), from)
		}
	}
	res, err := demo.RunWorkers(demofault.With(ctx, faults), wc)
	upBytes, upObjects := up.bytes.Load(), up.objects.Load()
	summary := demoSummary(storeURL, f.dir, res.Result, upBytes, upObjects, start)
	summary["workers"], summary["replaced"], summary["assignment"] = w.workers, res.Replaced, res.Assignment
	if err == nil && res.Stopped {
		return a.finishStop(f, res.Result, summary, say)
	}
	return a.finishDemo(ctx, res.Result, err, summary, say, func() {
		say("done in %s: %s this run by %s (%d replaced); the coordinator uploaded %s in %s",
			time.Since(start).Round(time.Millisecond), plural(res.Checkpoints, "checkpoint"), plural(w.workers, "worker"), res.Replaced, humanBytes(upBytes), plural(upObjects, "object"))
	}, latestCompletedOf(cfg.Storage))
}

// slotsOf says which slots: "the worker of slot 1", "the workers of
// slots 0, 2".
func slotsOf(slots []int) string {
	s := make([]string, len(slots))
	for i, n := range slots {
		s[i] = strconv.Itoa(n)
	}
	if len(s) == 1 {
		return "the worker of slot " + s[0]
	}
	return "the workers of slots " + strings.Join(s, ", ")
}

// workerAddr is the address workers reach a coordinator listening on
// addr at, as --coordinator takes it: HOST:PORT when addr is every
// interface of this host (its name depends on where the worker runs).
func workerAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return "HOST:" + port
	}
	return addr.String()
}

// needWorkers names the flags given of those that need --workers, with
// the verb: "--worker-listen needs", or both flags and "need".
func needWorkers(f workersFlags) string {
	var given []string
	if f.listen != "" {
		given = append(given, "--worker-listen")
	}
	if f.killWorkerAfter > 0 {
		given = append(given, "--kill-worker-after-records")
	}
	if len(given) == 1 {
		return given[0] + " needs"
	}
	return strings.Join(given, " and ") + " need"
}

// untilDone writes to w until ctx is done, then drops what it is given.
type untilDone struct {
	ctx context.Context
	w   io.Writer
}

func (u *untilDone) Write(p []byte) (int, error) {
	if u.ctx.Err() != nil {
		return len(p), nil
	}
	return u.w.Write(p)
}

// workerTokenEnv is the environment variable that holds a job's worker
// token, for the coordinator and its workers (demo.WorkersConfig.Token).
const workerTokenEnv = "TIDEMARK_WORKER_TOKEN"

// childLauncher starts the workers as child processes of this executable
// (`tidemark demo worker`), each in an empty directory base/slot-K.
type childLauncher struct {
	exe   string
	base  string
	args  []string // global flags passed on
	out   io.Writer
	token string // the job's worker token, passed in the environment

	mu    sync.Mutex
	procs map[int]*child
	wg    sync.WaitGroup
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

var _ demo.Killer = (*childLauncher)(nil)

// Launch starts the worker of slot with an empty directory, killing the
// previous one of the slot if it still runs.
func (l *childLauncher) Launch(ctx context.Context, slot int, addr string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.procs[slot]; old != nil {
		_ = old.cmd.Process.Kill()
		<-old.done
	}
	dir := filepath.Join(l.base, "slot-"+strconv.Itoa(slot))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	args := append([]string{"demo", "worker", "--coordinator", addr, "--slot", strconv.Itoa(slot), "--dir", dir}, l.args...)
	cmd := exec.Command(l.exe, args...)
	cmd.Stdout, cmd.Stderr = l.out, l.out
	// In the environment, not the arguments: other users see those.
	cmd.Env = append(os.Environ(), workerTokenEnv+"="+l.token)
	if err := cmd.Start(); err != nil {
		return err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	l.procs[slot] = c
	l.wg.Go(func() {
		_ = cmd.Wait()
		close(c.done)
	})
	return nil
}

// Kill kills the worker of slot with SIGKILL.
func (l *childLauncher) Kill(slot int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.procs[slot]
	if c == nil {
		return fmt.Errorf("no worker runs slot %d", slot)
	}
	return c.cmd.Process.Kill()
}

// close waits a little for the children to exit (the coordinator told
// them the job is done, or closed their connections), then kills the
// ones still running.
func (l *childLauncher) close() {
	l.mu.Lock()
	procs := l.procs
	l.mu.Unlock()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	expired := false
	for _, c := range procs {
		if !expired {
			select {
			case <-c.done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
		}
	}
	l.wg.Wait()
}
