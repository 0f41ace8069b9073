// Package totals is the partition-totals job that integration/jsjob runs
// and the connector/jetstream tests run in process.
package totals

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidemark-io/tidemark/job"
	"github.com/tidemark-io/tidemark/state"
)

// Job is the job: per input partition (record "v<n>" is on partition n mod
// Parts) it keeps, in Owner, the running total of the numbers read and
// emits "<p>:<n>:<total>". The totals do not depend on how partitions
// interleave, so the whole output is known in advance.
type Job struct {
	Parts int
	Owner string        // the state owner ("totals" if empty)
	Delay time.Duration // added to each batch so that kills land mid-run
}

// Process implements job.Processor.
func (j Job) Process(ctx context.Context, st *state.Store, in []job.Record) ([]job.Record, error) {
	if j.Delay > 0 {
		select {
		case <-time.After(j.Delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	owner := j.Owner
	if owner == "" {
		owner = "totals"
	}
	tot, err := st.Owner(owner)
	if err != nil {
		return nil, err
	}
	out := make([]job.Record, len(in))
	for i, r := range in {
		n, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "v"))
		if err != nil {
			return nil, fmt.Errorf("record %q: %w", r.Value, err)
		}
		p := strconv.Itoa(n % j.Parts)
		v, _, err := tot.Get([]byte(p))
		if err != nil {
			return nil, err
		}
		total, _ := strconv.Atoi(string(v))
		total += n
		if err := tot.Set([]byte(p), []byte(strconv.Itoa(total))); err != nil {
			return nil, err
		}
		out[i] = job.Record{Key: r.Key, Value: fmt.Appendf(nil, "%s:%d:%d", p, n, total)}
	}
	return out, nil
}
