package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/metrics"
)

// replicateCmd is `tidemark replicate`.
func (a *app) replicateCmd() *cobra.Command {
	var from, to, metricsAddr, name string
	var once bool
	var interval, grace time.Duration
	var keep, concurrency, gcEvery int
	cmd := &cobra.Command{
		Use:   "replicate --from URL --to URL",
		Short: "Copy every completed checkpoint of a job to a second store, continuously",
		Long: `replicate makes the store --to a replica of the job whose checkpoints are in --from:
every completed checkpoint is copied, each object checked against its record's
size and SHA-256 on the way, then its record, then the pointers, so that the
replica's latest completed checkpoint is always one a job can restore. Objects the
replica holds already are not sent again: an interrupted replicate resumes where it
stopped. It polls --from every --interval until stopped by SIGINT or SIGTERM (exit
0); --once runs one pass.

replicate takes the writer role of --to: a second replicate there fences the first,
and a job started on --to (a failover) fences replicate and resumes from the latest
checkpoint copied. It refuses, writing nothing, a --to whose writer role something
other than a replicate took (a job may run there) and one holding the checkpoints
of another job. Retention in --to keeps the newest --keep completed checkpoints
(collected every --gc-every copies): give it the job's.

The recovery point is how long the replica has lacked a checkpoint --from completed
(0 when it holds the latest): 'tidemark ls' on --to shows it, and --metrics-addr
serves it as tidemark_replication_recovery_point_seconds. See docs/replication.md.`,
		Example: `  tidemark replicate --from s3://eu-bucket/wordcount --to 's3://us-bucket/wordcount?region=us-east-1'
  tidemark replicate --from file://$PWD/.tidemark/store --to file:///mnt/dr/wordcount --once
  tidemark ls --store s3://us-bucket/wordcount    # the recovery point, as the replicator last wrote it`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			switch {
			case from == "" || to == "":
				return usagef("replicate: --from and --to are both required")
			case from == to:
				return usagef("replicate: --from and --to are the same store")
			case interval <= 0:
				return usagef("replicate: --interval must be positive, not %v", interval)
			case keep <= 0:
				return usagef("replicate: --keep must be at least 1, not %d", keep)
			case gcEvery <= 0:
				return usagef("replicate: --gc-every must be at least 1, not %d", gcEvery)
			case grace <= 0:
				return usagef("replicate: --grace must be positive, not %v", grace)
			}
			if metricsAddr != "" {
				if err := checkListenAddr("--metrics-addr", metricsAddr, "127.0.0.1:9465"); err != nil {
					return err
				}
			}
			var rm *metrics.ReplicationMetrics
			var cm *metrics.CheckpointMetrics
			if metricsAddr != "" {
				reg := metrics.NewRegistry()
				var err error
				if rm, err = metrics.NewReplicationMetrics(reg); err != nil {
					return err
				}
				if cm, err = metrics.NewCheckpointMetrics(reg); err != nil {
					return err
				}
				srv, err := metrics.Start(ctx, metricsAddr, reg)
				if err != nil {
					return fmt.Errorf("replicate: --metrics-addr: %w", err)
				}
				defer srv.Close()
				fmt.Fprintf(a.env.stderr, "replicate: metrics at %s\n", srv.URL())
			}
			src, err := openStoreURL(ctx, from, mustExist(from))
			if err != nil {
				return err
			}
			if err := readStorage(src).CheckStore(ctx); err != nil {
				return fmt.Errorf("replicate: --from %s: %w", redactURL(from), err)
			}
			dst, err := openStoreURL(ctx, to, to)
			if err != nil {
				return err
			}
			opts := blobstorage.ReplicateOptions{
				Interval: interval, Keep: keep, GCEvery: gcEvery, Grace: grace, Concurrency: concurrency,
				Name: name, Source: redactURL(from), Logger: a.logger,
			}
			if rm != nil {
				opts.Observer, opts.StorageObserver = rm, cm
			}
			out := &replicateOutput{a: a}
			opts.Observer = teeObserver{opts.Observer, out}
			r := blobstorage.NewReplicator(src, dst, opts)
			if err := r.Start(ctx); err != nil {
				return replicateError(to, err)
			}
			if once {
				pass, err := r.Once(ctx)
				if err != nil {
					return replicateError(to, err)
				}
				rp := r.RecoveryPoint(time.Now())
				a.emit(map[string]any{"source": pass.Source, "replica": pass.Replica, "copied": out.copied, "recovery_point_seconds": rp.Seconds()}, func(w io.Writer) {
					fmt.Fprintf(w, "replicate: the replica's latest completed checkpoint is %s (the source's %s), recovery point %s\n",
						orNone(pass.Replica), orNone(pass.Source), rp.Round(time.Millisecond))
				})
				return nil
			}
			fmt.Fprintf(a.env.stderr, "replicate: %s → %s, polling every %v\n", redactURL(from), redactURL(to), interval)
			err = r.Run(ctx)
			if err != nil {
				return replicateError(to, err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the store URL of the job (read only)")
	fl.StringVar(&to, "to", "", "the store URL of the replica (created if empty)")
	fl.BoolVar(&once, "once", false, "run one pass and exit")
	fl.DurationVar(&interval, "interval", blobstorage.DefaultReplicateInterval, "how often to poll --from for a new completed checkpoint")
	fl.IntVar(&keep, "keep", blobstorage.DefaultKeep, "completed checkpoints the replica retains (the job's --keep)")
	fl.IntVar(&gcEvery, "gc-every", blobstorage.DefaultReplicateGCEvery, "collect the replica after every N checkpoints copied")
	fl.DurationVar(&grace, "grace", blobstorage.DefaultGrace, "age before the replica's GC deletes what an interrupted copy left")
	fl.IntVar(&concurrency, "concurrency", blobstorage.DefaultConcurrency, "objects copied in parallel")
	fl.StringVar(&name, "name", "", "this replicator's name in the replica's status (default: host-pid)")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (empty: none)")
	return cmd
}

// replicateError says what to do about the refusals replicate can meet.
func replicateError(to string, err error) error {
	switch {
	case errors.Is(err, checkpoint.ErrFenced):
		return fmt.Errorf("replicate: fenced: another writer took %s over (a second replicate, or a job failing over to it); this one stops: %w", redactURL(to), err)
	case errors.Is(err, blobstorage.ErrNotReplica):
		return fmt.Errorf("replicate: %s is no replica any more: %w; replicate into a new prefix", redactURL(to), err)
	}
	return err
}

// replicateOutput prints a line per checkpoint copied.
type replicateOutput struct {
	a      *app
	copied []string
}

func (o *replicateOutput) Behind(time.Time) {}

func (o *replicateOutput) Replicated(st blobstorage.ReplicationStats) {
	if st.Err != nil {
		if !errors.Is(st.Err, context.Canceled) {
			fmt.Fprintf(o.a.env.stderr, "replicate: %s not copied: %v\n", st.ID, st.Err)
		}
		return
	}
	o.copied = append(o.copied, st.ID)
	if o.a.output == "json" {
		return
	}
	fmt.Fprintf(o.a.env.stdout, "replicated %s: %s (%s) copied, %s (%s) already there, in %s; completed in the source %s ago\n",
		st.ID, plural(st.Objects, "object"), humanBytes(st.Bytes), plural(st.SkippedObjects, "object"), humanBytes(st.SkippedBytes),
		st.Duration.Round(time.Millisecond), time.Since(st.Completed).Round(time.Millisecond))
}

// teeObserver passes what a Replicator reports to two observers.
type teeObserver [2]blobstorage.ReplicationObserver

func (t teeObserver) Behind(since time.Time) {
	for _, o := range t {
		if o != nil {
			o.Behind(since)
		}
	}
}

func (t teeObserver) Replicated(st blobstorage.ReplicationStats) {
	for _, o := range t {
		if o != nil {
			o.Replicated(st)
		}
	}
}
