package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
	"github.com/tidemark-io/tidemark/metrics"
)

// The NATS credentials of a job with workers, in the environment of the
// coordinator and of every worker (never in the arguments: other users
// see those).
const (
	natsUserEnv     = "TIDEMARK_NATS_USER"
	natsPasswordEnv = "TIDEMARK_NATS_PASSWORD"
)

// defaultNATSUser is the user of the embedded server when
// $TIDEMARK_NATS_USER is not set.
const defaultNATSUser = "tidemark"

// workersFlags are the demo's flags of a job with workers.
type workersFlags struct {
	workers         int
	listen          string
	natsURL         string
	killWorkerAfter uint64
	workerTimeout   time.Duration
}

// addWorkersFlags registers the flags of a job with workers on the demo
// command, and its hidden worker subcommand.
func (a *app) addWorkersFlags(cmd *cobra.Command, f *workersFlags) {
	fl := cmd.Flags()
	fl.IntVar(&f.workers, "workers", 0, "run the job as N worker processes, each reading its partitions and holding their state, and this process as their coordinator (1 to "+strconv.Itoa(demo.DefaultOwners)+", the job's partitions; 0: one process); a resumed job may use another N")
	fl.StringVar(&f.listen, "worker-listen", "", "with --workers: start no workers; the embedded NATS server listens on this address (for example :4222) for the N workers, each started as: tidemark demo worker --coordinator HOST:PORT --slot K, with $"+natsUserEnv+" and $"+natsPasswordEnv+" set as for this process ($"+natsPasswordEnv+" required)")
	fl.StringVar(&f.natsURL, "nats", "", "with --workers: use this NATS server (nats://HOST:PORT, JetStream enabled, credentials from $"+natsUserEnv+" and $"+natsPasswordEnv+") instead of an embedded one")
	fl.Uint64Var(&f.killWorkerAfter, "kill-worker-after-records", 0, "with --workers: worker 0 kills itself once it read N records, once per store; the coordinator starts a new one")
	fl.DurationVar(&f.workerTimeout, "worker-timeout", demo.DefaultWorkerTimeout, "with --workers: a checkpoint a worker does not answer within this long restarts every worker from the last checkpoint")
	_ = fl.MarkHidden("kill-worker-after-records")
	cmd.AddCommand(a.demoWorkerCmd())
}

func (f workersFlags) check(every uint64, getenv func(string) string) error {
	switch {
	case f.workers < 0:
		return usagef("demo: --workers must not be negative")
	case f.workers > demo.DefaultOwners:
		return usagef("demo: --workers %d: the job has %d partitions (and owners of the state), so at most %d workers", f.workers, demo.DefaultOwners, demo.DefaultOwners)
	case f.workers == 0 && (f.listen != "" || f.killWorkerAfter > 0 || f.natsURL != ""):
		return usagef("demo: %s --workers", needWorkers(f))
	case f.workers == 0:
		return nil
	case f.listen != "" && f.killWorkerAfter > 0:
		return usagef("demo: --kill-worker-after-records kills a worker this process started: not with --worker-listen")
	case f.listen != "" && f.natsURL != "":
		return usagef("demo: --worker-listen is the embedded NATS server's address: not with --nats")
	case f.workerTimeout <= 0:
		return usagef("demo: --worker-timeout must be positive")
	case every > 0:
		return usagef("demo: --checkpoint-every counts records, which only the workers see: with --workers the coordinator checkpoints every --interval")
	case f.listen != "" && getenv(natsPasswordEnv) == "":
		return usagef("demo: --worker-listen needs $%s: the secret the workers started elsewhere present to the NATS server", natsPasswordEnv)
	case f.natsURL != "":
		u, err := url.Parse(f.natsURL)
		if err != nil || u.Scheme != "nats" || checkHostPort(u.Host) != nil {
			return usagef("demo: --nats %s: want nats://HOST:PORT", f.natsURL)
		}
	case f.listen != "":
		return checkListenAddr("--worker-listen", f.listen, ":4222")
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
		Long: `worker connects to the NATS server of a demo job run with --workers (the one
its coordinator embeds, or the one of its --nats), reads its partitions of the
source, holds their state and saves it as its part of every checkpoint, in the
store the coordinator names. A coordinator started without --worker-listen
starts its workers itself.

--coordinator is HOST:PORT of that NATS server; the worker authenticates with
$TIDEMARK_NATS_USER (default tidemark) and $TIDEMARK_NATS_PASSWORD, and retries
a server that does not listen yet for a minute, saying so. A worker started for
a slot that has one replaces it. --dir is locked while the worker runs: one
worker per directory.`,
		Example: `  TIDEMARK_NATS_PASSWORD=… tidemark demo --workers 3 --worker-listen :4222 --store s3://…   # the coordinator
  TIDEMARK_NATS_PASSWORD=… tidemark demo worker --coordinator coordinator:4222 --slot 0 --dir /work/node`,
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
			notify := func(msg string) { fmt.Fprintf(a.env.stderr, "tidemark demo worker (slot %d): %s\n", slot, msg) }
			cfg := demo.WorkerConfig{Slot: slot, Dir: dir, Logger: a.logger, Notify: notify,
				Crash: func() {
					notify("killing itself now (--kill-worker-after-records)")
					if a.env.crash != nil {
						a.env.crash()
					}
				}}
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
			// SIGTERM lets the worker run on for up to --stop-timeout:
			// its coordinator, draining on the same signal, still needs
			// its part of the final checkpoint, then ends the job.
			if a.env.terminate != nil {
				a.env.terminate(stopTimeout)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			nc, err := a.connectWorker(ctx, coord, cancel, notify)
			if err != nil {
				return err
			}
			defer nc.Close()
			if cfg.JetStream, err = natsjs.New(nc); err != nil {
				return fmt.Errorf("demo worker: %w", err)
			}
			err = demo.ServeWorker(ctx, cfg)
			switch {
			case err != nil && cmd.Context().Err() != nil && errors.Is(err, context.Canceled):
				// Interrupted (Ctrl-C reaches the coordinator and the
				// workers it started alike): the coordinator says so.
				return quietError{err}
			case err != nil && ctx.Err() != nil:
				return fmt.Errorf("demo worker: lost the coordinator's NATS server at %s: %w", coord, err)
			}
			return err
		},
	}
	hideIgnoredGlobalFlags(cmd, "store", "output", "progress")
	fl := cmd.Flags()
	fl.StringVar(&coord, "coordinator", "", "the NATS server of the job (the coordinator's --worker-listen), HOST:PORT")
	fl.IntVar(&slot, "slot", -1, "the worker's slot, 0 … N-1")
	fl.StringVar(&dir, "dir", "", "local working directory of the worker (should be empty)")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "serve the worker's Prometheus metrics (its parts, restores and store operations) at http://ADDR/metrics (empty: none)")
	fl.DurationVar(&stopTimeout, "stop-timeout", defaultStopTimeout, "on SIGTERM, keep working for the coordinator (which drains) up to this long, then stop (exit 143)")
	return cmd
}

// coordinatorWait bounds how long a worker retries a NATS server that
// does not answer yet.
const coordinatorWait = time.Minute

// connectWorker connects to the NATS server at addr with the
// environment's credentials, retrying for coordinatorWait. A refusal of
// the credentials is final. lost is called once the connection is gone
// for good: the coordinator's server is down.
func (a *app) connectWorker(ctx context.Context, addr string, lost func(), notify func(string)) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.UserInfo(cmpOr(a.env.getenv(natsUserEnv), defaultNATSUser), a.env.getenv(natsPasswordEnv)),
		// The embedded server dies with its coordinator: give up on it
		// within half a minute, even when its host is gone too.
		nats.Timeout(2 * time.Second), nats.MaxReconnects(10), nats.ReconnectWait(time.Second),
		nats.ClosedHandler(func(*nats.Conn) { lost() }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			a.logger.Debug("demo worker: nats", "err", err) // a watch's retries while the server is away
		}),
	}
	deadline := time.Now().Add(coordinatorWait)
	waited := false
	for {
		nc, err := nats.Connect("nats://"+addr, opts...)
		if err == nil {
			return nc, nil
		}
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, fmt.Errorf("demo worker: the NATS server at %s refused this worker's credentials ($%s, $%s): %w", addr, natsUserEnv, natsPasswordEnv, err)
		}
		if !waited {
			notify(fmt.Sprintf("waiting for the coordinator at %s (up to %v)…", addr, coordinatorWait))
			waited = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w; the coordinator at %s was unreachable (%v)", ctx.Err(), addr, err)
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("demo worker: the coordinator at %s was unreachable for %v (%v)", addr, coordinatorWait, err)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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
		return errors.New("want HOST:PORT, for example coordinator:4222")
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

// jobNATS is the NATS server of a job with workers, as the coordinator
// reaches it and as it tells its workers to.
type jobNATS struct {
	addr           string // HOST:PORT for the workers' --coordinator
	user, password string
	srv            *server.Server // the embedded server, nil for --nats
}

// startNATS starts the embedded NATS server of a job with workers: on
// loopback (or --worker-listen), JetStream under dir/nats (emptied: it
// holds nothing the store does not), with one user.
func startNATS(dir, listen, user, password string) (*jobNATS, error) {
	host, port := "127.0.0.1", server.RANDOM_PORT
	if listen != "" {
		h, p, _ := net.SplitHostPort(listen) // checked by the flags
		host = h
		if n, _ := strconv.Atoi(p); n > 0 {
			port = n
		}
	}
	store := filepath.Join(dir, "nats")
	if err := os.RemoveAll(store); err != nil {
		return nil, err
	}
	srv, err := server.NewServer(&server.Options{ServerName: "tidemark-demo", Host: host, Port: port,
		JetStream: true, StoreDir: store, Username: user, Password: password, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("demo: NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("demo: the NATS server for the workers could not listen on %s:%d", host, port)
	}
	_, p, _ := net.SplitHostPort(srv.Addr().String())
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // this process's own connection
	}
	return &jobNATS{addr: net.JoinHostPort(host, p), user: user, password: password, srv: srv}, nil
}

func (n *jobNATS) close() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// runDemoWorkers runs the demo job of cfg with f.workers workers; the
// rest of the demo's setup is runDemo's.
func (a *app) runDemoWorkers(ctx context.Context, f demoFlags, cfg demo.Config, faults demofault.Faults, openURL, storeURL string, up *uploads, start time.Time) error {
	w := f.workersFlags
	stderr := &syncWriter{w: a.env.stderr}
	say := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	faults.KillWorkerAfter = w.killWorkerAfter
	user, password := cmpOr(a.env.getenv(natsUserEnv), defaultNATSUser), a.env.getenv(natsPasswordEnv)
	var ns *jobNATS
	if w.natsURL != "" {
		u, _ := url.Parse(w.natsURL) // checked by the flags
		ns = &jobNATS{addr: u.Host, user: user, password: password}
	} else {
		if password == "" {
			// The workers are this process's children: a password made
			// up here keeps any other local process out of the job.
			password = rand.Text()
		}
		var err error
		if ns, err = startNATS(f.dir, w.listen, user, password); err != nil {
			return err
		}
		defer ns.close()
	}
	nc, err := nats.Connect("nats://"+ns.addr, nats.UserInfo(ns.user, ns.password), nats.Timeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("demo: connect to NATS at %s: %w", ns.addr, err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	wc := demo.WorkersConfig{Config: cfg, Workers: w.workers, JetStream: js, StoreURL: openURL,
		Concurrency: f.concurrency, WorkerTimeout: w.workerTimeout}
	var cl *childLauncher
	ended := false // the job ended or stopped: its workers exit on their own
	if w.listen == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: find this executable to start workers: %w", err)
		}
		// Once the run is interrupted, what the children say (the
		// coordinator gone, as they see it) is noise: the coordinator
		// says once that the job was interrupted and how to resume.
		out := &untilDone{ctx: ctx, w: stderr}
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		cl = &childLauncher{exe: exe, base: filepath.Join(f.dir, "workers"), out: out, procs: map[int]*child{}, addr: ns.addr,
			args: []string{"--log-level", a.logLevel, "--log-format", a.logFormat, "--stop-timeout", f.stopTimeout.String()},
			env:  []string{natsUserEnv + "=" + ns.user, natsPasswordEnv + "=" + ns.password}, say: say, ctx: ctx, fail: cancel}
		defer func() { cl.close(ended) }()
		wc.Launcher = cl
	} else {
		// Said once the job passed its checks: a refused run waits for
		// no one.
		wc.Launcher = sayLauncher(func() {
			say("waiting for %s on %s: start each with %s=… %s=… tidemark demo worker --coordinator %s --slot K",
				plural(w.workers, "worker"), ns.srv.Addr(), natsUserEnv, natsPasswordEnv, workerAddr(ns.srv.Addr()))
		})
	}
	res, err := demo.RunWorkers(demofault.With(ctx, faults), wc)
	ended = err == nil
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errWorkersFailed) {
		return cause // not an interruption: say why
	}
	upBytes, upObjects := up.bytes.Load(), up.objects.Load()
	summary := demoSummary(storeURL, f.dir, res, upBytes, upObjects, start)
	replaced := 0
	if cl != nil {
		replaced = cl.replaced()
	}
	summary["workers"], summary["replaced"] = w.workers, replaced
	if err == nil && res.Stopped {
		return a.finishStop(f, res, summary, say)
	}
	return a.finishDemo(ctx, res, err, summary, say, func() {
		say("done in %s: %s this run by %s (%d replaced); the coordinator uploaded %s in %s",
			time.Since(start).Round(time.Millisecond), plural(res.Checkpoints, "checkpoint"), plural(w.workers, "worker"), replaced, humanBytes(upBytes), plural(upObjects, "object"))
	}, latestCompletedOf(cfg.Storage))
}

// sayLauncher launches nothing: the workers are started elsewhere. It
// says so, once, when the job would launch its first worker.
type sayLauncher func()

func (f sayLauncher) Launch(_ context.Context, slot int) error {
	if slot == 0 {
		f()
	}
	return nil
}

// workerAddr is the address workers reach a server listening on addr
// at, as --coordinator takes it: HOST:PORT when addr is every interface
// of this host (its name depends on where the worker runs).
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
// the verb: "--worker-listen needs", or the flags and "need".
func needWorkers(f workersFlags) string {
	var given []string
	if f.listen != "" {
		given = append(given, "--worker-listen")
	}
	if f.natsURL != "" {
		given = append(given, "--nats")
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

// maxRelaunches bounds how many dead workers one run replaces before it
// gives up: a worker that dies at once would be started forever.
const maxRelaunches = 16

// errWorkersFailed stops a run whose workers keep dying.
var errWorkersFailed = errors.New("demo: the workers keep dying")

// childLauncher starts the workers as child processes of this executable
// (`tidemark demo worker`), each in an empty directory base/slot-K, and
// starts a new one, in an empty directory, for a slot whose worker died.
type childLauncher struct {
	exe  string
	base string
	addr string   // the NATS server, as --coordinator
	args []string // global flags passed on
	env  []string // the NATS credentials
	out  io.Writer
	say  func(string, ...any)
	ctx  context.Context // the run: once done, a dead worker is not replaced
	fail context.CancelCauseFunc

	mu       sync.Mutex
	closed   bool
	procs    map[int]*child
	restarts int
	wg       sync.WaitGroup
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Launch starts the worker of slot with an empty directory.
func (l *childLauncher) Launch(_ context.Context, slot int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.launchLocked(slot)
}

func (l *childLauncher) launchLocked(slot int) error {
	if l.closed {
		return nil
	}
	dir := filepath.Join(l.base, "slot-"+strconv.Itoa(slot))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	args := append([]string{"demo", "worker", "--coordinator", l.addr, "--slot", strconv.Itoa(slot), "--dir", dir}, l.args...)
	cmd := exec.Command(l.exe, args...)
	cmd.Stdout, cmd.Stderr = l.out, l.out
	// In the environment, not the arguments: other users see those.
	cmd.Env = append(os.Environ(), l.env...)
	if err := cmd.Start(); err != nil {
		return err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	l.procs[slot] = c
	l.wg.Go(func() {
		err := cmd.Wait()
		close(c.done)
		if err != nil {
			l.died(slot, cmd.Process.Pid, err)
		}
	})
	return nil
}

// died starts a new worker for slot, whose worker pid exited with err.
func (l *childLauncher) died(slot, pid int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.ctx.Err() != nil {
		return
	}
	if l.restarts >= maxRelaunches {
		l.fail(fmt.Errorf("%w: worker %d (pid %d) exited (%v) after %d replaced", errWorkersFailed, slot, pid, err, l.restarts))
		return
	}
	l.restarts++
	l.say("worker %d (pid %d) lost: %v; starting a new worker for slot %d on an empty directory", slot, pid, err, slot)
	if err := l.launchLocked(slot); err != nil {
		l.fail(fmt.Errorf("%w: start worker %d: %v", errWorkersFailed, slot, err))
	}
}

func (l *childLauncher) replaced() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.restarts
}

// close waits a little for the children to exit when the job ended
// (they were told so), then kills the ones still running.
func (l *childLauncher) close(ended bool) {
	l.mu.Lock()
	l.closed = true
	procs := l.procs
	l.mu.Unlock()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	expired := !ended
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
