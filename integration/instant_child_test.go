package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/blobstoretest"
	"github.com/tidemark-io/tidemark/s3store"
	"github.com/tidemark-io/tidemark/state"
)

// instantChildEnv holds, as JSON, the restore a re-executed test binary
// performs instead of running tests (see TestMain): a fresh process on
// an empty directory, with nothing of the state in its memory.
const instantChildEnv = "TIDEMARK_INSTANT_CHILD"

// instantJob is one restore on an empty node, run by instantChild.
type instantJob struct {
	// Kind is "timeline" (first read, then random reads in windows while
	// the state hydrates in the background) or "reads" (cold reads,
	// hydration, warm reads, one after the other).
	Kind string `json:"kind"`

	Endpoint  string `json:"endpoint"`
	Region    string `json:"region"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
	Bucket    string `json:"bucket"`
	Prefix    string `json:"prefix"` // the job's store
	ID        string `json:"id"`     // the checkpoint
	Dir       string `json:"dir"`    // empty

	Remote       bool               `json:"remote"`
	RemotePrefix string             `json:"remote_prefix"`
	Levels       state.RemoteLevels `json:"levels"`
	Generation   string             `json:"generation"`
	CacheSize    int64              `json:"cache_size"` // per owner

	Owners       []string `json:"owners"`
	KeysPerOwner uint64   `json:"keys_per_owner"`
	ValueSize    int      `json:"value_size"`
	Overwrite    uint64   `json:"overwrite_seed"` // the keys overwriteBenchState(seed) changed have value seed 2
	Seed         uint64   `json:"seed"`           // of the random reads

	ColdReads int           `json:"cold_reads"` // reads: before hydration
	WarmReads int           `json:"warm_reads"` // reads: after it
	Window    time.Duration `json:"window"`     // timeline: window length
	Tail      time.Duration `json:"tail"`       // timeline: reading after hydration (local: after the first read)
	Max       time.Duration `json:"max"`        // timeline: reading at most
}

// instantEvent is a line the child writes to stdout.
type instantEvent struct {
	Ev string `json:"ev"` // first, window, hydrated, cold, warm, error

	// first: the phases of the restore, in seconds, and the bytes
	// downloaded until the first read (checkpoint files and objects).
	Download float64 `json:"download,omitempty"`
	Open     float64 `json:"open,omitempty"`
	Get      float64 `json:"get,omitempty"`
	DownB    int64   `json:"down_bytes,omitempty"`

	// window, cold, warm: reads done in Secs; hydrated: Secs it took.
	Reads int     `json:"reads,omitempty"`
	Secs  float64 `json:"secs,omitempty"`
	// cold, warm: ranged and whole GETs, and Stats (HEAD), sent meanwhile.
	Gets  int64  `json:"gets,omitempty"`
	Stats int64  `json:"stats,omitempty"`
	Err   string `json:"err,omitempty"`
}

// instantChild runs the job in $TIDEMARK_INSTANT_CHILD and returns the
// exit code.
func instantChild() int {
	var job instantJob
	if err := json.Unmarshal([]byte(os.Getenv(instantChildEnv)), &job); err != nil {
		fmt.Fprintf(os.Stderr, "instant child: %s: %v\n", instantChildEnv, err)
		return 2
	}
	enc := json.NewEncoder(os.Stdout)
	var mu sync.Mutex // the hydration reports from its own goroutine
	emit := func(e instantEvent) {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(e); err != nil {
			fmt.Fprintf(os.Stderr, "instant child: %v\n", err)
			os.Exit(1)
		}
	}
	if err := job.run(emit); err != nil {
		emit(instantEvent{Ev: "error", Err: err.Error()})
		return 1
	}
	return 0
}

func (job instantJob) run(emit func(instantEvent)) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	t0 := time.Now()
	raw, err := s3store.New(ctx, s3store.Options{
		Bucket: job.Bucket, Endpoint: job.Endpoint, Region: job.Region, PathStyle: true,
		AccessKey: job.AccessKey, SecretKey: job.SecretKey,
	})
	if err != nil {
		return err
	}
	counted := blobstoretest.Intercept(raw, blobstoretest.Hooks{})
	bs, err := blobstore.WithPrefix(counted, job.Prefix)
	if err != nil {
		return err
	}
	node := blobstorage.New(bs, filepath.Join(job.Dir, "node"), blobstorage.Options{})
	if err := node.Restore(ctx, job.ID); err != nil {
		return fmt.Errorf("restore %s: %w", job.ID, err)
	}
	tOpen := time.Now()
	opts := state.Options{MemTableSize: 64 << 20, CacheSize: 64 << 20}
	if job.Remote {
		opts.Remote = state.RemoteOptions{Store: bs, Prefix: job.RemotePrefix, Generation: job.Generation, Levels: job.Levels, CacheSize: job.CacheSize}
	}
	st, err := state.OpenCheckpoint(ctx, node.StateDir(job.ID), filepath.Join(job.Dir, "live"), opts)
	if err != nil {
		return err
	}
	defer st.Close()
	owners := make([]*state.Owner, len(job.Owners))
	for i, id := range job.Owners {
		if owners[i], err = st.Owner(id); err != nil {
			return err
		}
	}
	tGet := time.Now()
	overwritten := overwrittenKeys(job.Owners, job.KeysPerOwner, job.Overwrite)
	read := func(i int, k uint64) error {
		id := job.Owners[i]
		got, ok, err := owners[i].Get(stateKey(id, k))
		seed := uint64(1)
		if overwritten[id][k] {
			seed = 2
		}
		if err != nil || !ok || string(got) != string(stateValue(id, seed, k, job.ValueSize)) {
			return fmt.Errorf("read of owner %q key %d: present=%v err=%v, or the value differs", id, k, ok, err)
		}
		return nil
	}
	for i := range owners {
		if err := read(i, job.Seed%job.KeysPerOwner); err != nil {
			return err
		}
	}
	emit(instantEvent{Ev: "first", Download: tOpen.Sub(t0).Seconds(), Open: tGet.Sub(tOpen).Seconds(),
		Get: time.Since(tGet).Seconds(), DownB: counts(counted).down})

	rng := rand.New(rand.NewPCG(job.Seed, 7))
	next := 0
	readRandom := func() error {
		next = (next + 1) % len(owners)
		return read(next, rng.Uint64N(job.KeysPerOwner))
	}
	timed := func(n int) (float64, error) {
		t := time.Now()
		for range n {
			if err := readRandom(); err != nil {
				return 0, err
			}
		}
		return time.Since(t).Seconds(), nil
	}

	switch job.Kind {
	case "reads":
		c0 := counts(counted)
		secs, err := timed(job.ColdReads)
		if err != nil {
			return err
		}
		c := counts(counted).sub(c0)
		emit(instantEvent{Ev: "cold", Reads: job.ColdReads, Secs: secs, Gets: c.get, Stats: c.stat})
		t := time.Now()
		if err := st.Hydrate(ctx); err != nil {
			return err
		}
		emit(instantEvent{Ev: "hydrated", Secs: time.Since(t).Seconds()})
		c0 = counts(counted)
		if secs, err = timed(job.WarmReads); err != nil {
			return err
		}
		c = counts(counted).sub(c0)
		emit(instantEvent{Ev: "warm", Reads: job.WarmReads, Secs: secs, Gets: c.get, Stats: c.stat})
		return nil
	case "timeline":
		hydrated := make(chan error, 1)
		start := time.Now()
		if job.Remote {
			go func() {
				t := time.Now()
				err := st.Hydrate(ctx)
				if err == nil {
					emit(instantEvent{Ev: "hydrated", Secs: time.Since(t).Seconds()})
				}
				hydrated <- err
			}()
		} else {
			hydrated <- nil
		}
		var stopAt time.Time
		for {
			w0, n := time.Now(), 0
			for time.Since(w0) < job.Window {
				if err := readRandom(); err != nil {
					return err
				}
				n++
			}
			emit(instantEvent{Ev: "window", Reads: n, Secs: time.Since(w0).Seconds()})
			if stopAt.IsZero() {
				select {
				case err := <-hydrated:
					if err != nil {
						return fmt.Errorf("hydrate: %w", err)
					}
					stopAt = time.Now().Add(job.Tail)
				default:
				}
			}
			if (!stopAt.IsZero() && time.Now().After(stopAt)) || time.Since(start) > job.Max {
				// Close waits for a hydration still running; stop it.
				cancel()
				return nil
			}
		}
	default:
		return fmt.Errorf("kind %q", job.Kind)
	}
}

// instantTimedEvent is an event and when the parent received it, since
// it started the child.
type instantTimedEvent struct {
	instantEvent
	At time.Duration
}

// runInstantChild starts a child process for job and returns its events,
// each stamped with its arrival since the child was started.
func runInstantChild(tb testing.TB, job instantJob) []instantTimedEvent {
	tb.Helper()
	raw, err := json.Marshal(job)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.CommandContext(tb.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), instantChildEnv+"="+string(raw))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var events []instantTimedEvent
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		at := time.Since(t0)
		var e instantEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			tb.Fatalf("instant child: line %q: %v", sc.Text(), err)
		}
		events = append(events, instantTimedEvent{e, at})
	}
	werr := cmd.Wait()
	for _, e := range events {
		if e.Ev == "error" {
			werr = errors.Join(werr, errors.New(e.Err))
		}
	}
	if werr != nil {
		tb.Fatalf("instant child (%s, %s): %v\n%s", job.Kind, job.Prefix, werr, stderr.String())
	}
	return events
}
