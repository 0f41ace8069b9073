package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// The recovery point grows with the clock while the replica lags, and is
// 0 once it does not; copies count objects and bytes, failed ones too.
func TestReplicationMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewReplicationMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	m.now = func() time.Time { return now }
	const rp = "tidemark_replication_recovery_point_seconds"
	gauge, counter := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	if got := gather(t, reg).value(t, rp, gauge, ""); got != 0 {
		t.Fatalf("recovery point before any poll = %v", got)
	}
	m.Behind(t0.Add(-2 * time.Second))
	now = t0.Add(3 * time.Second)
	if got := gather(t, reg).value(t, rp, gauge, ""); got != 5 {
		t.Fatalf("recovery point = %v, want 5", got)
	}
	m.Replicated(blobstorage.ReplicationStats{ID: "a", Objects: 2, Bytes: 100, SkippedObjects: 3, SkippedBytes: 300, Completed: t0, Duration: time.Second})
	m.Replicated(blobstorage.ReplicationStats{ID: "b", Objects: 1, Bytes: 10, Err: errors.New("cut")})
	m.Behind(time.Time{})
	f := gather(t, reg)
	for name, want := range map[string]float64{
		"tidemark_replication_copied_objects_total":  3,
		"tidemark_replication_copied_bytes_total":    110,
		"tidemark_replication_skipped_objects_total": 3,
		"tidemark_replication_skipped_bytes_total":   300,
	} {
		if got := f.value(t, name, counter, ""); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := f.value(t, rp, gauge, ""); got != 0 {
		t.Errorf("recovery point once caught up = %v", got)
	}
	if got := f.value(t, "tidemark_replication_last_source_completed_timestamp_seconds", gauge, ""); got != float64(t0.Unix()) {
		t.Errorf("last source completed = %v", got)
	}
	for res, n := range map[string]uint64{ResultSuccess: 1, ResultFailure: 1} {
		if s := f.get(t, "tidemark_replication_checkpoint_duration_seconds", dto.MetricType_HISTOGRAM, `result="`+res+`"`); s.count != n {
			t.Errorf("%s copies: %d, want %d", res, s.count, n)
		}
	}
}
