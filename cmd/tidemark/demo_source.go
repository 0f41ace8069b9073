package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demo"
	"github.com/tidemark-io/tidemark/cmd/tidemark/internal/demofault"
)

// sourceHelp describes --source for the demo and demo produce.
const sourceHelp = "read the input from the JetStream stream STREAM of this NATS server (nats://HOST:PORT/STREAM; " +
	"credentials from $" + natsUserEnv + " and $" + natsPasswordEnv + " when set) and write the output exactly once " +
	"to the stream STREAM_out (it reads what STREAM holds: --records and --words are then unused); fill STREAM first with: tidemark demo produce --source nats://HOST:PORT/STREAM"

// natsSource is a parsed --source: the server's address and the stream.
type natsSource struct{ addr, stream string }

// parseSource parses --source nats://HOST:PORT/STREAM.
func parseSource(s string) (natsSource, error) {
	u, err := url.Parse(s)
	stream := ""
	if err == nil {
		stream = strings.TrimPrefix(u.Path, "/")
	}
	if err != nil || u.Scheme != "nats" || u.Host == "" || u.Port() == "" || u.User != nil || u.RawQuery != "" ||
		stream == "" || strings.ContainsAny(stream, "./*> \t") {
		return natsSource{}, usagef("demo: --source %s: want nats://HOST:PORT/STREAM (a stream name without . * > or spaces; credentials in $%s and $%s)", s, natsUserEnv, natsPasswordEnv)
	}
	return natsSource{addr: u.Host, stream: stream}, nil
}

// connect connects to the server of src with the demo's NATS
// credentials, when set.
func (a *app) connectSource(src natsSource) (*nats.Conn, natsjs.JetStream, error) {
	opts := []nats.Option{nats.Timeout(5 * time.Second), nats.Name("tidemark demo")}
	if pw := a.env.getenv(natsPasswordEnv); pw != "" || a.env.getenv(natsUserEnv) != "" {
		opts = append(opts, nats.UserInfo(cmpOr(a.env.getenv(natsUserEnv), defaultNATSUser), pw))
	}
	nc, err := nats.Connect("nats://"+src.addr, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("demo: --source: connect to NATS at %s: %w", src.addr, err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("demo: --source: %w", err)
	}
	return nc, js, nil
}

// demoProduceCmd is `tidemark demo produce`: it fills the input stream.
// A command of its own, not a flag of the demo: it takes no store, no
// dir and no lock, and runs once before any number of demo runs.
func (a *app) demoProduceCmd() *cobra.Command {
	var source string
	var records uint64
	var words int
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Fill a JetStream stream with the demo's records, for demo --source",
		Long: `produce creates the JetStream stream STREAM of --source (if absent), with the
partitions demo --source reads, and publishes the demo's --records generated words
into it: the same words for the same --records and --words, each with a
Nats-Msg-Id. A stream that already holds --records records is left as it is; one
holding another number is refused (delete it, or use another stream).`,
		Example: `  tidemark demo produce --source nats://127.0.0.1:4222/words --records 200000
  tidemark demo --source nats://127.0.0.1:4222/words`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if records == 0 || words <= 0 {
				return usagef("demo produce: --records and --words must be positive, not %d and %d", records, words)
			}
			src, err := parseSource(source)
			if err != nil {
				return err
			}
			nc, js, err := a.connectSource(src)
			if err != nil {
				return err
			}
			defer nc.Close()
			start := time.Now()
			n, err := demo.Produce(cmd.Context(), js, src.stream, records, words)
			if err != nil {
				return err
			}
			if n == 0 {
				fmt.Fprintf(a.env.stdout, "stream %s already holds %d records: nothing to do\n", src.stream, records)
				return nil
			}
			fmt.Fprintf(a.env.stdout, "produced %d records into stream %s in %s\n", n, src.stream, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&source, "source", "", "the stream to fill: nats://HOST:PORT/STREAM (credentials from $"+natsUserEnv+" and $"+natsPasswordEnv+" when set)")
	fl.Uint64Var(&records, "records", demo.DefaultRecords, "number of records to publish")
	fl.IntVar(&words, "words", demo.DefaultWords, "vocabulary size of the records")
	_ = cmd.MarkFlagRequired("source")
	return cmd
}

// openSource parses --source, connects and checks that its stream
// exists, before the demo changes anything.
func (a *app) openSource(ctx context.Context, s string) (demo.NATS, func(), error) {
	src, err := parseSource(s)
	if err != nil {
		return demo.NATS{}, nil, err
	}
	nc, js, err := a.connectSource(src)
	if err != nil {
		return demo.NATS{}, nil, err
	}
	n := demo.NATS{JS: js, Stream: src.stream}
	if err := n.CheckInput(ctx); err != nil {
		nc.Close()
		if errors.Is(err, demo.ErrStreamNotFound) {
			return demo.NATS{}, nil, fmt.Errorf("demo: --source %s: stream %s not found; fill it first: tidemark demo produce --source %s", s, src.stream, s)
		}
		return demo.NATS{}, nil, err
	}
	return n, nc.Close, nil
}

// runDemoSource runs the demo over the input stream of --source.
func (a *app) runDemoSource(ctx context.Context, f demoFlags, cfg demo.Config, faults demofault.Faults, src demo.NATS,
	storeURL string, up *uploads, start time.Time, say func(string, ...any), storage checkpoint.Storage) error {
	out := demo.OutputStream(src.Stream)
	cfg.Progress = func(p demo.Progress) {
		switch p.Event {
		case "start":
			say("tidemark demo: word count over stream %s into stream %s, store %s, local dir %s", src.Stream, out, storeURL, f.dir)
			if p.From == "" {
				say("starting fresh (no completed checkpoint in the store)")
			} else {
				say("resumed from checkpoint %s", p.From)
			}
		case "records", "checkpoint":
			say("records %d  checkpoints %d (last %s)  uploaded %s in %s", p.Offset, p.Checkpoints, orNone(p.LastCompleted),
				humanBytes(up.bytes.Load()), plural(up.objects.Load(), "object"))
		}
	}
	res, err := demo.RunNATS(demofault.With(ctx, faults), cfg, src)
	upBytes, upObjects := up.bytes.Load(), up.objects.Load()
	summary := demoSummary(storeURL, f.dir, res, upBytes, upObjects, start)
	summary["source"], summary["output_stream"] = f.source, out
	if err == nil && res.Stopped {
		return a.finishStop(f, res, summary, say)
	}
	return a.finishDemo(ctx, res, err, summary, say, func() {
		say("done in %s: %s this run, %s uploaded in %s",
			time.Since(start).Round(time.Millisecond), plural(res.Checkpoints, "checkpoint"), humanBytes(upBytes), plural(upObjects, "object"))
	}, latestCompletedOf(storage))
}
