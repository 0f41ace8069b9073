package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// check reads the output stream and checks it holds each input's effect
// exactly once (checkTotals), printing "exactly-once: OK, N records".
func check(ctx context.Context, js natsjs.JetStream, o options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.checkTimeout)
	defer cancel()
	values, err := readOutput(ctx, js, o.out)
	if err != nil {
		return err
	}
	if err := checkTotals(values, o.parts, o.records); err != nil {
		return fmt.Errorf("exactly-once: FAILED: %w", err)
	}
	fmt.Fprintf(out, "exactly-once: OK, %d records\n", len(values))
	return nil
}

// again retries f, each attempt bounded to 10s, until it succeeds or ctx
// ends: the cluster may be electing leaders after a node died.
func again(ctx context.Context, f func(context.Context) error) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(rctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readOutput returns the values of every record on "<stream>.*" (the
// commit markers excluded), in stream order. It reads as many as the
// stream counts on those subjects.
func readOutput(ctx context.Context, js natsjs.JetStream, stream string) ([]string, error) {
	var st natsjs.Stream
	var info *natsjs.StreamInfo
	err := again(ctx, func(rctx context.Context) error {
		var err error
		if st, err = js.Stream(rctx, stream); err != nil {
			return err
		}
		info, err = st.Info(rctx, natsjs.WithSubjectFilter(stream+".*"))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	total := 0
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	out := make([]string, 0, total)
	if total == 0 {
		return out, nil
	}
	// Each Fetch of an ordered consumer resumes after the last message
	// delivered, so a failed pull repeats nothing.
	var cons natsjs.Consumer
	err = again(ctx, func(rctx context.Context) error {
		var err error
		cons, err = st.OrderedConsumer(rctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{stream + ".*"}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("consumer of %s: %w", stream, err)
	}
	for len(out) < total {
		b, err := cons.Fetch(min(total-len(out), 500), natsjs.FetchMaxWait(time.Second))
		if err == nil {
			for m := range b.Messages() {
				out = append(out, string(m.Data()))
			}
			err = b.Error()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %d of the %d records of %s.*: %v", len(out), total, stream, err)
		}
		if err != nil && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out, nil
}

// checkTotals checks that out holds each input number below n once, per
// partition in input order, with the running total a single uninterrupted
// run would have computed.
func checkTotals(out []string, parts, n int) error {
	next := make([]int, parts) // next number expected per partition
	sums := make([]int, parts) // running total per partition
	for p := range parts {
		next[p] = p
	}
	for _, v := range out {
		f := strings.Split(v, ":")
		if len(f) != 3 {
			return fmt.Errorf("output %q: want <p>:<n>:<total>", v)
		}
		p, _ := strconv.Atoi(f[0])
		num, _ := strconv.Atoi(f[1])
		total, _ := strconv.Atoi(f[2])
		if p < 0 || p >= parts || num != next[p] {
			return fmt.Errorf("output %q: partition %d expected number %d next (a duplicate or a gap)", v, p, next[p])
		}
		sums[p] += num
		if total != sums[p] {
			return fmt.Errorf("output %q: running total %d, want %d (state and output disagree)", v, total, sums[p])
		}
		next[p] += parts
	}
	for p := range parts {
		if next[p] < n {
			return fmt.Errorf("partition %d: output stops before %d (lost records)", p, next[p])
		}
	}
	if len(out) != n {
		return fmt.Errorf("output holds %d records, want %d", len(out), n)
	}
	return nil
}
