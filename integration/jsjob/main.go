// Command jsjob runs one role of the JetStream job of the integration
// tests: the partition totals job of connector/jetstream's tests, spread
// over a coordinator and workers (job.RunCoordinator, job.RunWorker)
// that meet through a jetstream.Group and checkpoint into an S3 store.
//
//	jsjob setup       -nats URLS -parts P -records N -replicas R
//	jsjob coordinator -nats URLS -store S3URL -slots w0,w1,w2 -dir DIR
//	jsjob worker      -nats URLS -store S3URL -slot w0 -partitions 0,3 -parts P -dir DIR
//	jsjob check       -nats URLS -parts P -records N
//
// Input record n ("v<n>") is on partition n mod P of stream "in"; the
// job keeps per partition the running total of the numbers and emits
// "<p>:<n>:<total>" to the output stream (-out, default "out") through
// the exactly-once Sink. setup creates the streams and publishes N
// records (none with -records 0). check reads the output and prints
// "exactly-once: OK, N records" when each input's effect is there once,
// in order, with the right totals.
//
// The NATS credentials come from NATS_USER and NATS_PASSWORD, the S3
// ones from the standard AWS environment. Progress goes to stdout, one
// event a line ("start <ckpt>", "checkpoint <id>", "records <n>"); the
// tests and the benchmark in package integration read it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/integration/jsjob/totals"
	"github.com/tidemark-io/tidemark/job"
	_ "github.com/tidemark-io/tidemark/s3store" // the s3:// scheme
)

// inStream is the input stream; outParts the output's partition count.
const (
	inStream = "in"
	outParts = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jsjob:", err)
		os.Exit(1)
	}
}

// options are the flags of every role.
type options struct {
	nats, store, group, dir, out           string
	slots, slot, partitions                string
	parts, records, replicas, batch        int
	interval, timeout, delay, checkTimeout time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: jsjob setup|coordinator|worker|check [flags]")
	}
	role := args[0]
	var o options
	fs := flag.NewFlagSet("jsjob "+role, flag.ContinueOnError)
	fs.StringVar(&o.nats, "nats", "nats://127.0.0.1:4222", "NATS URLs, comma-separated")
	fs.StringVar(&o.store, "store", "", "the job's store URL (s3://bucket/prefix?...)")
	fs.StringVar(&o.group, "group", "jsjob", "the group's KV bucket")
	fs.StringVar(&o.out, "out", "out", "the output stream")
	fs.StringVar(&o.dir, "dir", "", "local working directory")
	fs.StringVar(&o.slots, "slots", "w0,w1,w2", "the job's slots (coordinator)")
	fs.StringVar(&o.slot, "slot", "", "this worker's slot")
	fs.StringVar(&o.partitions, "partitions", "", "the input partitions this worker reads, comma-separated")
	fs.IntVar(&o.parts, "parts", 6, "input partitions")
	fs.IntVar(&o.records, "records", 0, "input records (setup, check)")
	fs.IntVar(&o.replicas, "replicas", 1, "replicas of the streams and the group's bucket")
	fs.IntVar(&o.batch, "batch", 20, "records per batch (worker)")
	fs.DurationVar(&o.interval, "interval", time.Second, "time between barriers (coordinator)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "barrier timeout (coordinator)")
	fs.DurationVar(&o.delay, "delay", 0, "processing time added to each batch (worker)")
	fs.DurationVar(&o.checkTimeout, "check-timeout", 2*time.Minute, "how long check reads")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	nc, err := nats.Connect(o.nats, nats.UserInfo(os.Getenv("NATS_USER"), os.Getenv("NATS_PASSWORD")),
		nats.Timeout(5*time.Second), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o.nats, err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	switch role {
	case "setup":
		return setup(ctx, js, o, out)
	case "coordinator":
		return coordinator(ctx, js, o, out)
	case "worker":
		return worker(ctx, js, o, out)
	case "check":
		return check(ctx, js, o, out)
	}
	return fmt.Errorf("unknown role %q: want setup, coordinator, worker or check", role)
}

// setup creates the streams and publishes the input, waiting for the
// cluster to answer first.
func setup(ctx context.Context, js natsjs.JetStream, o options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := again(ctx, func(rctx context.Context) error {
		if _, err := tmjs.CreateInputStream(rctx, js, inStream, o.replicas); err != nil {
			return err
		}
		return tmjs.CreateOutputStreams(rctx, js, o.out, o.replicas)
	})
	if err != nil {
		return err
	}
	start := time.Now()
	var futures []natsjs.PubAckFuture
	for i := range o.records {
		r := job.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
		f, err := js.PublishMsgAsync(tmjs.NewMsg(tmjs.PartitionSubject(inStream, i%o.parts), r))
		if err != nil {
			return fmt.Errorf("publish record %d: %w", i, err)
		}
		futures = append(futures, f)
		// A window of acknowledgements: nats.go refuses too many pending.
		if len(futures) == 1000 || i == o.records-1 {
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return fmt.Errorf("publish: %w", err)
				case <-ctx.Done():
					return fmt.Errorf("publish: %w", ctx.Err())
				}
			}
			futures = futures[:0]
		}
	}
	fmt.Fprintf(out, "published %d records on %d partitions in %v\n", o.records, o.parts, time.Since(start).Round(time.Millisecond))
	return nil
}

// openStore opens the job's store.
func openStore(ctx context.Context, o options) (blobstore.Blobstore, error) {
	if o.store == "" {
		return nil, errors.New("-store is required")
	}
	if o.dir == "" {
		return nil, errors.New("-dir is required")
	}
	return blobstore.Open(ctx, o.store)
}

// logEvent prints a job event, one a line.
func logEvent(out io.Writer) func(job.Event) {
	return func(e job.Event) {
		switch e.Kind {
		case "batch":
			fmt.Fprintf(out, "records %d\n", e.Records)
		case "start", "checkpoint":
			fmt.Fprintf(out, "%s %s\n", e.Kind, e.Checkpoint)
		}
	}
}

func coordinator(ctx context.Context, js natsjs.JetStream, o options, out io.Writer) error {
	bs, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	g, err := tmjs.NewGroup(ctx, js, o.group, o.replicas)
	if err != nil {
		return err
	}
	res, err := job.RunCoordinator(ctx, job.CoordinatorConfig{
		Group:   g,
		Storage: blobstorage.New(bs, filepath.Join(o.dir, "checkpoints"), blobstorage.Options{}),
		Slots:   strings.Split(o.slots, ","),
		Sink: func(slot string) (job.Sink, error) {
			return tmjs.NewSink(ctx, js, tmjs.SinkConfig{Stream: o.out, Partitions: outParts, Part: slot})
		},
		Interval: o.interval,
		Timeout:  o.timeout,
		Observe:  logEvent(out),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "done: %d checkpoints, last %s, restored %q (%v)\n", res.Checkpoints, res.Last, res.Restored, res.Action)
	return nil
}

func worker(ctx context.Context, js natsjs.JetStream, o options, out io.Writer) error {
	bs, err := openStore(ctx, o)
	if err != nil {
		return err
	}
	if o.slot == "" {
		return errors.New("-slot is required")
	}
	var parts []int
	for _, s := range strings.Split(o.partitions, ",") {
		p, err := strconv.Atoi(s)
		if err != nil || p < 0 || p >= o.parts {
			return fmt.Errorf("-partitions %q: want numbers below -parts %d", o.partitions, o.parts)
		}
		parts = append(parts, p)
	}
	g, err := tmjs.NewGroup(ctx, js, o.group, o.replicas)
	if err != nil {
		return err
	}
	sink, err := tmjs.NewSink(ctx, js, tmjs.SinkConfig{Stream: o.out, Partitions: outParts, Part: o.slot})
	if err != nil {
		return err
	}
	owner := "totals-" + o.slot
	_, err = job.RunWorker(ctx, job.WorkerConfig{
		Group: g, Slot: o.slot, Blobstore: bs, Dir: o.dir,
		Source: func(context.Context) (job.Source, error) {
			return tmjs.NewSource(js, tmjs.SourceConfig{Stream: inStream, Partitions: parts, MaxRecords: o.batch, StopAtEnd: true})
		},
		Processor: totals.Job{Parts: o.parts, Owner: owner, Delay: o.delay},
		Sink:      sink,
		Owners:    []string{owner},
		Observe:   logEvent(out),
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "done")
	return nil
}
