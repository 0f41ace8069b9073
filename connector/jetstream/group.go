package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/job"
)

// Keys of a Group's bucket.
const (
	planKey      = "plan"    // the coordinator's job.Plan, its epoch fencing
	slotPrefix   = "slot."   // slot.<slot>: the worker incarnation holding it
	reportPrefix = "report." // report.<slot>: the slot's latest job.Report
)

// Group is a job.Group over a JetStream key-value bucket: the plan is one
// key the coordinator writes with compare-and-set against its own last
// revision (so a coordinator fenced by a newer Lead can write nothing),
// each slot's holder is a key workers take over with compare-and-set,
// and reports are keys the coordinator watches. Workers watch the plan.
// No record passes through it.
//
// Every process makes its own Group (NewGroup) on its own connection; the
// NATS credentials of that connection (user/password, NKey, creds file)
// are the workers' authentication.
type Group struct {
	kv natsjs.KeyValue

	mu  sync.Mutex
	rev uint64 // revision of the plan this coordinator last wrote
}

var _ job.Group = (*Group)(nil)

// NewGroup creates (or opens) the bucket of a job's group, file-stored
// with the given replicas (0 means 1), keeping only the latest value of
// each key.
func NewGroup(ctx context.Context, js natsjs.JetStream, bucket string, replicas int) (*Group, error) {
	if err := validName(bucket); err != nil {
		return nil, err
	}
	var kv natsjs.KeyValue
	err := retry(ctx, func(rctx context.Context) error {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(rctx, natsjs.KeyValueConfig{
			Bucket: bucket, History: 1, Storage: natsjs.FileStorage, Replicas: max(replicas, 1),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: group bucket %s: %w", bucket, err)
	}
	return &Group{kv: kv}, nil
}

func casConflict(err error) bool {
	var apiErr *natsjs.APIError
	return errors.Is(err, natsjs.ErrKeyRevisionMismatch) || errors.Is(err, natsjs.ErrKeyExists) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant)
}

// Lead makes the caller the coordinator at epoch, unless a coordinator
// of a greater epoch leads (checkpoint.ErrFenced).
func (g *Group) Lead(ctx context.Context, epoch uint64) error {
	body, _ := json.Marshal(job.Plan{Epoch: epoch})
	for {
		var e natsjs.KeyValueEntry
		err := retry(ctx, func(rctx context.Context) error {
			var err error
			e, err = g.kv.Get(rctx, planKey)
			return err
		})
		var rev uint64
		switch {
		case errors.Is(err, natsjs.ErrKeyNotFound):
			err = retry(ctx, func(rctx context.Context) error {
				var err error
				rev, err = g.kv.Create(rctx, planKey, body)
				return err
			})
		case err != nil:
			return fmt.Errorf("jetstream: group: read plan: %w", err)
		default:
			var p job.Plan
			if err := json.Unmarshal(e.Value(), &p); err != nil {
				return fmt.Errorf("jetstream: group: plan: %w", err)
			}
			if p.Epoch > epoch {
				return fmt.Errorf("jetstream: group: a coordinator of epoch %d leads, not %d: %w", p.Epoch, epoch, checkpoint.ErrFenced)
			}
			err = retry(ctx, func(rctx context.Context) error {
				var err error
				rev, err = g.kv.Update(rctx, planKey, body, e.Revision())
				return err
			})
		}
		if casConflict(err) {
			continue // another coordinator wrote in between: read again
		}
		if err != nil {
			return fmt.Errorf("jetstream: group: lead: %w", err)
		}
		g.mu.Lock()
		g.rev = rev
		g.mu.Unlock()
		return nil
	}
}

// Announce writes p if no other coordinator wrote the plan since this
// one's last write (Lead or Announce).
func (g *Group) Announce(ctx context.Context, p job.Plan) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("jetstream: group: plan: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rev == 0 {
		return errors.New("jetstream: group: Announce before Lead")
	}
	var rev uint64
	err = retry(ctx, func(rctx context.Context) error {
		var err error
		rev, err = g.kv.Update(rctx, planKey, body, g.rev)
		return err
	})
	if casConflict(err) {
		// A retry whose first attempt landed (its reply was lost) finds
		// its own plan: no other coordinator writes these bytes, since
		// the epoch is in them.
		var e natsjs.KeyValueEntry
		if gerr := retry(ctx, func(rctx context.Context) error {
			var err error
			e, err = g.kv.Get(rctx, planKey)
			return err
		}); gerr == nil && bytes.Equal(e.Value(), body) {
			g.rev = e.Revision()
			return nil
		}
		return fmt.Errorf("jetstream: group: the plan was written by another coordinator: %w", checkpoint.ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("jetstream: group: announce: %w", err)
	}
	g.rev = rev
	return nil
}

// pollEvery is how often a Group reads its keys again besides watching
// them: a watch (an ordered consumer) can stall across a stream leader
// change, and a missed plan or report would stop the job.
const pollEvery = 500 * time.Millisecond

// follow hands f every new value of the keys matching filter, each
// revision once and in order per key: from a watch, and from reading the
// keys again every pollEvery. f is called with nil once the watch has
// delivered the values present at the start. f runs on one goroutine at a
// time; returning false stops following. done runs once both readers
// stopped (ctx done, or f returned false).
func (g *Group) follow(ctx context.Context, filter string, f func(natsjs.KeyValueEntry) bool, done func()) error {
	ctx, cancel := context.WithCancel(ctx)
	var w natsjs.KeyWatcher
	err := retry(ctx, func(rctx context.Context) error {
		var err error
		w, err = g.kv.Watch(ctx, filter) // the watch lives with ctx
		return err
	})
	if err != nil {
		cancel()
		return fmt.Errorf("jetstream: group: watch %s: %w", filter, err)
	}
	var mu sync.Mutex
	seen := map[string]uint64{} // key -> last revision handed to f
	hand := func(e natsjs.KeyValueEntry) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if e != nil {
			if e.Revision() <= seen[e.Key()] {
				return
			}
			seen[e.Key()] = e.Revision()
		}
		if !f(e) {
			cancel()
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return // the poll goes on
				}
				hand(e)
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			for _, e := range g.read(ctx, filter) {
				hand(e)
			}
		}
	}()
	go func() {
		wg.Wait()
		cancel()
		done()
	}()
	return nil
}

// read returns the current entries of the keys matching filter, or what
// it could read of them within a request's time.
func (g *Group) read(ctx context.Context, filter string) []natsjs.KeyValueEntry {
	rctx, cancel := request(ctx)
	defer cancel()
	keys := []string{filter}
	if strings.HasSuffix(filter, ">") {
		l, err := g.kv.ListKeysFiltered(rctx, filter)
		if err != nil {
			return nil
		}
		keys = nil
		for k := range l.Keys() {
			keys = append(keys, k)
		}
		_ = l.Stop()
	}
	var out []natsjs.KeyValueEntry
	for _, k := range keys {
		e, err := g.kv.Get(rctx, k)
		if err == nil {
			out = append(out, e)
		}
	}
	return out
}

// Members delivers the holder of every slot, at once and on changes.
func (g *Group) Members(ctx context.Context) (<-chan map[string]string, error) {
	ch := make(chan map[string]string, 1)
	cur := map[string]string{}
	err := g.follow(ctx, slotPrefix+">", func(e natsjs.KeyValueEntry) bool {
		if e != nil {
			slot := strings.TrimPrefix(e.Key(), slotPrefix)
			if e.Operation() == natsjs.KeyValuePut {
				cur[slot] = string(e.Value())
			} else {
				delete(cur, slot)
			}
		}
		select {
		case <-ch: // only the latest matters
		default:
		}
		ch <- maps.Clone(cur)
		return true
	}, func() { close(ch) })
	return ch, err
}

// Reports delivers the reports in the bucket, then every report written:
// a report of an earlier barrier is told apart by its fields.
func (g *Group) Reports(ctx context.Context) (<-chan job.Report, error) {
	ch := make(chan job.Report, 64)
	err := g.follow(ctx, reportPrefix+">", func(e natsjs.KeyValueEntry) bool {
		if e == nil || e.Operation() != natsjs.KeyValuePut {
			return true
		}
		var r job.Report
		if json.Unmarshal(e.Value(), &r) != nil {
			return true // not a report: ignored
		}
		select {
		case ch <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}, func() { close(ch) })
	return ch, err
}

// Join takes slot over for worker (compare-and-set on the slot's key)
// and delivers the plan, then every plan written after it.
func (g *Group) Join(ctx context.Context, slot, worker string) (<-chan job.Plan, error) {
	key := slotPrefix + slot
	for {
		var e natsjs.KeyValueEntry
		err := retry(ctx, func(rctx context.Context) error {
			var err error
			e, err = g.kv.Get(rctx, key)
			return err
		})
		switch {
		case errors.Is(err, natsjs.ErrKeyNotFound):
			err = retry(ctx, func(rctx context.Context) error {
				_, err := g.kv.Create(rctx, key, []byte(worker))
				return err
			})
		case err != nil:
			return nil, fmt.Errorf("jetstream: group: read slot %s: %w", slot, err)
		default:
			err = retry(ctx, func(rctx context.Context) error {
				_, err := g.kv.Update(rctx, key, []byte(worker), e.Revision())
				return err
			})
		}
		if casConflict(err) {
			continue // another incarnation joined in between: take over again
		}
		if err != nil {
			return nil, fmt.Errorf("jetstream: group: join slot %s: %w", slot, err)
		}
		break
	}
	ch := make(chan job.Plan, 16)
	err := g.follow(ctx, planKey, func(e natsjs.KeyValueEntry) bool {
		if e == nil || e.Operation() != natsjs.KeyValuePut {
			return true
		}
		var p job.Plan
		if json.Unmarshal(e.Value(), &p) != nil {
			return true
		}
		select {
		case ch <- p:
			return true
		case <-ctx.Done():
			return false
		}
	}, func() { close(ch) })
	return ch, err
}

// Report writes r under its slot's report key.
func (g *Group) Report(ctx context.Context, r job.Report) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("jetstream: group: report: %w", err)
	}
	err = retry(ctx, func(rctx context.Context) error {
		_, err := g.kv.Put(rctx, reportPrefix+r.Slot, body)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstream: group: report: %w", err)
	}
	return nil
}
