package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	tmjs "github.com/tidemark-io/tidemark/connector/jetstream"
	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// ErrWorkerRefused is returned (wrapped) by ServeWorker for a worker the
// job has no place for: its slot is out of range.
var ErrWorkerRefused = errors.New("demo: worker refused")

// WorkerConfig describes one worker of a job run by RunWorkers.
type WorkerConfig struct {
	// JetStream reaches the coordinator's NATS server (required).
	JetStream natsjs.JetStream
	// Slot is the worker's slot, 0 to the job's Workers - 1.
	Slot int
	// Dir is the worker's working directory (required).
	Dir string
	// Open opens the store the coordinator names. Default:
	// blobstore.Open.
	Open func(ctx context.Context, url string) (blobstore.Blobstore, error)
	// Observer hears of the worker's parts and restores (metrics).
	Observer blobstorage.Observer
	// Notify, if set, hears what the worker does, in sentences.
	Notify func(string)
	// Crash, if set, kills the process (demofault.Faults.KillWorkerAfter);
	// nil makes ServeWorker return ErrCrashed instead.
	Crash  func()
	Logger *slog.Logger
}

// ServeWorker runs one worker of the job the coordinator published on
// cfg.JetStream, on job.RunWorker, until the coordinator ends the job.
// Started again after any error, on any node, it takes its slot over.
func ServeWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.JetStream == nil || cfg.Dir == "" || cfg.Slot < 0 {
		return errors.New("demo: serve worker: JetStream, Dir and a slot ≥ 0 are required")
	}
	if cfg.Open == nil {
		cfg.Open = blobstore.Open
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	notify := func(format string, args ...any) {
		if cfg.Notify != nil {
			cfg.Notify(fmt.Sprintf(format, args...))
		}
	}
	spec, err := readJob(ctx, cfg.JetStream)
	if err != nil {
		return err
	}
	if cfg.Slot >= spec.Workers {
		return fmt.Errorf("%w: slot %d is out of range: the job has %s (slots 0 to %d)",
			ErrWorkerRefused, cfg.Slot, plural(spec.Workers, "worker"), spec.Workers-1)
	}
	bs, err := cfg.Open(ctx, spec.Store)
	if err != nil {
		return fmt.Errorf("demo: open store: %w", err)
	}
	group, err := tmjs.NewGroup(ctx, cfg.JetStream, groupBucket, 1)
	if err != nil {
		return fmt.Errorf("demo: group: %w", err)
	}
	parts := partsOf(cfg.Slot, spec.Workers)
	owners := make([]string, len(parts))
	for i, p := range parts {
		owners[i] = ownerIDs(DefaultOwners)[p]
	}
	proc := &partCount{}
	if spec.KillWorkerAfter > 0 && cfg.Slot == 0 {
		proc.kill = func(ctx context.Context, n uint64) error {
			return killSelf(ctx, bs, spec.KillWorkerAfter, n, cfg.Crash)
		}
	}
	_, err = job.RunWorker(ctx, job.WorkerConfig{
		Group: group, Slot: slotName(cfg.Slot), Blobstore: bs, Dir: cfg.Dir,
		Source: func(context.Context) (job.Source, error) {
			return newPartSource(spec.Records, spec.Words, spec.Batch, parts, spec.Slow), nil
		},
		Processor: proc,
		Sink:      job.NewBlobSink(bs, SlotOutputPrefix(cfg.Slot)),
		Owners:    owners,
		State:     state.Options{MemTableSize: spec.MemTableSize, CacheSize: spec.CacheSize},
		// The runtime opens the owners' tables in place ("" keeps them local).
		RemoteState: spec.RemoteState,
		Options:     blobstorage.Options{Concurrency: spec.Concurrency, Observer: cfg.Observer, Logger: cfg.Logger},
		Logger:      cfg.Logger,
		Observe: func(e job.Event) {
			if e.Kind != "start" {
				return
			}
			proc.read = 0
			if e.Checkpoint == "" {
				notify("owners %s, empty", strings.Join(owners, ","))
			} else {
				notify("owners %s, restored from the store, checkpoint %s", strings.Join(owners, ","), e.Checkpoint)
			}
		},
	})
	return err
}

// readJob waits for the coordinator's description of the job.
func readJob(ctx context.Context, js natsjs.JetStream) (jobSpec, error) {
	for {
		kv, err := js.KeyValue(ctx, jobBucket)
		if err == nil {
			var e natsjs.KeyValueEntry
			if e, err = kv.Get(ctx, jobKey); err == nil {
				var spec jobSpec
				if err := json.Unmarshal(e.Value(), &spec); err != nil {
					return jobSpec{}, fmt.Errorf("demo: the coordinator's job: %w", err)
				}
				return spec, nil
			}
		}
		if !errors.Is(err, natsjs.ErrBucketNotFound) && !errors.Is(err, natsjs.ErrKeyNotFound) {
			return jobSpec{}, fmt.Errorf("demo: read the coordinator's job: %w", err)
		}
		select {
		case <-ctx.Done():
			return jobSpec{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killSelf is demofault.Faults.KillWorkerAfter: once per store (a marker),
// when worker 0 has read at records this run.
func killSelf(ctx context.Context, bs blobstore.Blobstore, at, read uint64, crash func()) error {
	if read < at {
		return nil
	}
	marker := fmt.Sprintf("%s%d", KilledWorkerMarkerPrefix, at)
	if done, err := bs.Exists(ctx, marker); err != nil || done {
		return err
	}
	if err := bs.Put(ctx, marker, strings.NewReader(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("demo: write kill marker: %w", err)
	}
	if crash != nil {
		crash() // the CLI's never returns
	}
	return fmt.Errorf("demo: worker 0 at %d records: %w", read, ErrCrashed)
}

// partCount is the workers' Processor: it adds each record to the count
// of its word in the owner of its partition, and outputs, per word of
// the batch, the count it gained (as Run's).
type partCount struct {
	read uint64
	kill func(ctx context.Context, read uint64) error
}

func (p *partCount) Process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	byOwner := map[string]map[string]uint64{}
	for _, r := range in {
		o := ownerIDs(DefaultOwners)[partitionOf(string(r.Key), DefaultOwners)]
		if byOwner[o] == nil {
			byOwner[o] = map[string]uint64{}
		}
		byOwner[o][string(r.Key)]++
	}
	var out []job.Record
	for _, o := range slices.Sorted(maps.Keys(byOwner)) {
		part, err := openPartition(st, o)
		if err != nil {
			return nil, err
		}
		if err := part.add(byOwner[o]); err != nil {
			return nil, err
		}
		for _, w := range slices.Sorted(maps.Keys(byOwner[o])) {
			out = append(out, job.Record{Key: []byte(w), Value: be(byOwner[o][w])})
		}
	}
	p.read += uint64(len(in))
	if p.kill != nil {
		if err := p.kill(ctx, p.read); err != nil {
			return nil, err
		}
	}
	return out, nil
}
