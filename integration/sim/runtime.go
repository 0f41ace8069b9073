package sim

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
	pstate "github.com/tidemark-io/tidemark/state"
)

// The runtime mode (Config.Runtime): each writer runs job.Run, the real
// runtime, with Pebble state, the reference BlobSink on the store, and
// the source and processor below.

const (
	sumOwner = "sum"
	outPfx   = "out/" // the BlobSink's prefix in the sink's store
)

// numbers is a replayable source of 0…n-1, in batches whose size depends
// on the offset only (a replay reads the same batches).
type numbers struct{ n, next int }

func (s *numbers) Seek(_ context.Context, off []byte) error {
	s.next = 0
	if off != nil {
		return json.Unmarshal(off, &s.next)
	}
	return nil
}

func (s *numbers) Next(ctx context.Context) ([]job.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.next >= s.n {
		return nil, io.EOF
	}
	var out []job.Record
	for range 1 + s.next%3 {
		if s.next == s.n {
			break
		}
		out = append(out, job.Record{Key: []byte(strconv.Itoa(s.next))})
		s.next++
	}
	return out, nil
}

func (s *numbers) Offsets() ([]byte, error) { return json.Marshal(s.next) }

// summer keeps the running total of the numbers in owner's state and
// outputs each number with the total up to it: a value tells whether the
// state counted every number before it exactly once.
type summer struct{ owner string }

func (p summer) Process(_ context.Context, st *pstate.Store, in []job.Record) ([]job.Record, error) {
	o, err := st.Owner(p.owner)
	if err != nil {
		return nil, err
	}
	v, _, err := o.Get([]byte("total"))
	if err != nil {
		return nil, err
	}
	total, _ := strconv.Atoi(string(v))
	out := make([]job.Record, len(in))
	for i, r := range in {
		n, _ := strconv.Atoi(string(r.Key))
		total += n
		out[i] = job.Record{Key: r.Key, Value: []byte(strconv.Itoa(total))}
	}
	return out, o.Set([]byte("total"), []byte(strconv.Itoa(total)))
}

func triangle(n int) int { return n * (n - 1) / 2 } // 0+1+…+(n-1)

// runJob is one run of job.Run in process p.
func (w *World) runJob(ctx context.Context, p *proc, st *blobstorage.Storage) error {
	res, err := job.Run(ctx, job.Config{
		Storage:      st,
		Dir:          filepath.Join(p.dir, "job"),
		Source:       &numbers{n: w.cfg.Records},
		Processor:    summer{owner: sumOwner},
		Sink:         job.NewBlobSink(w.sinkBS, outPfx),
		Interval:     time.Hour,
		EveryRecords: 4,
		GCEvery:      3,
		Owners:       []string{sumOwner},
		RemoteState:  w.cfg.RemoteState,
	})
	epoch := st.Epoch()
	if epoch != 0 {
		w.checks.writerEpoch(p.name, epoch)
	}
	w.sched.Note(p.name, "job.Run: %s %s, %d checkpoints, %d records: %v", res.Action, res.Restored, res.Checkpoints, res.Records, err)
	return err
}

// checkJobState opens the Pebble state restored into dir (its remote
// SSTs, if any, in bs) and checks its total against the offsets of
// record cp.
func (w *World) checkJobState(bs blobstore.Blobstore, dir string, cp *checkpoint.CheckpointData, what string) {
	var next int
	if err := json.Unmarshal(cp.Offsets(), &next); err != nil {
		w.Violation("%s: offsets %q: %v", what, cp.Offsets(), err)
		return
	}
	work, err := os.MkdirTemp(w.cfg.Dir, "open-")
	if err != nil {
		w.Violation("%s: %v", what, err)
		return
	}
	defer os.RemoveAll(work)
	st, err := pstate.OpenCheckpoint(WithProc(context.Background(), "check"), dir, filepath.Join(work, "live"), w.checkOptions(bs))
	if err != nil {
		w.Violation("%s: the restored state does not open: %v", what, err)
		return
	}
	defer st.Close()
	o, err := st.Owner(sumOwner)
	if err != nil {
		w.Violation("%s: %v", what, err)
		return
	}
	v, _, err := o.Get([]byte("total"))
	total, _ := strconv.Atoi(string(v))
	if err != nil || total != triangle(next) {
		w.Violation("%s: the state's total is %d (%v), the record's offset %d says %d", what, total, err, next, triangle(next))
	}
}

// checkOptions are the options the checks open a restored state with:
// read-only, and in remote mode reading its SSTs from bs as "check".
func (w *World) checkOptions(bs blobstore.Blobstore) pstate.Options {
	if w.cfg.RemoteState == "" {
		return pstate.Options{}
	}
	return pstate.Options{ReadOnly: true, Remote: pstate.RemoteOptions{
		Store: procStore{Blobstore: bs, proc: "check"}, Prefix: blobstorage.RemotePrefix,
		Generation: blobstorage.RemoteGeneration(0),
	}}
}

// jobExactlyOnce checks the BlobSink's committed output: every number
// once, each with the total of the numbers before it.
func (c *checker) jobExactlyOnce(ctx context.Context) {
	w := c.w
	seen := make([]int, w.cfg.Records)
	sink := job.NewBlobSink(w.sinkBS, outPfx)
	for r, err := range sink.Output(ctx) {
		if err != nil {
			w.Violation("exactly-once: reading the output: %v", err)
			return
		}
		n, err := strconv.Atoi(string(r.Key))
		if err != nil || n < 0 || n >= w.cfg.Records {
			w.Violation("exactly-once: output record %q is no input", r.Key)
			continue
		}
		seen[n]++
		if total, _ := strconv.Atoi(string(r.Value)); total != triangle(n+1) {
			w.Violation("exactly-once: record %d committed with total %s, want %d (the state counted a record twice or not at all)", n, r.Value, triangle(n+1))
		}
	}
	for n, k := range seen {
		switch {
		case k == 0:
			w.Violation("exactly-once: record %d never committed", n)
		case k > 1:
			w.Violation("exactly-once: record %d committed %d times", n, k)
		}
	}
	c.committedRecords = w.cfg.Records
}
