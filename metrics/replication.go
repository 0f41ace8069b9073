package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// ReplicationMetrics counts what a blobstorage.Replicator does and
// exposes its recovery point. It implements blobstorage.ReplicationObserver;
// its methods are safe for concurrent use.
type ReplicationMetrics struct {
	duration                *prometheus.HistogramVec
	copiedBytes, copied     prometheus.Counter
	skippedBytes, skipped   prometheus.Counter
	recoveryPoint           prometheus.GaugeFunc
	lastReplicatedCompleted prometheus.Gauge

	mu     sync.Mutex
	behind time.Time        // see blobstorage.ReplicationObserver.Behind
	now    func() time.Time // time.Now; tests replace it
}

var _ blobstorage.ReplicationObserver = (*ReplicationMetrics)(nil)

// NewReplicationMetrics creates the replication families and registers
// them on reg (nil registers nothing). It fails, registering nothing,
// when reg already has these families.
func NewReplicationMetrics(reg prometheus.Registerer) (*ReplicationMetrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "replication", Name: name, Help: help})
	}
	m := &ReplicationMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "replication", Name: "checkpoint_duration_seconds",
			Help:    "Duration of the copies of checkpoints to the replica, by result; its _count is the number of checkpoints copied (or failed).",
			Buckets: CheckpointDurationBuckets,
		}, []string{"result"}),
		copiedBytes:  counter("copied_bytes_total", "Bytes of objects copied to the replica, each verified against its record."),
		copied:       counter("copied_objects_total", "Objects copied to the replica."),
		skippedBytes: counter("skipped_bytes_total", "Bytes of objects the replica held already (shared with an earlier checkpoint, or copied by an interrupted pass) and that were not sent again."),
		skipped:      counter("skipped_objects_total", "Objects the replica held already and that were not sent again."),
		lastReplicatedCompleted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "replication", Name: "last_source_completed_timestamp_seconds",
			Help: "Unix time at which the source completed the latest checkpoint copied to the replica (0 before the first).",
		}),
		now: time.Now,
	}
	m.duration.WithLabelValues(ResultSuccess)
	m.duration.WithLabelValues(ResultFailure)
	m.recoveryPoint = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "replication", Name: "recovery_point_seconds",
		Help: "How long the replica has lacked a checkpoint the source completed: now minus the time the source completed the oldest of its checkpoints newer than the replica's latest, 0 when the replica holds the source's latest completed checkpoint.",
	}, m.RecoveryPoint)
	if err := register(reg, m.duration, m.copiedBytes, m.copied, m.skippedBytes, m.skipped, m.recoveryPoint, m.lastReplicatedCompleted); err != nil {
		return nil, err
	}
	return m, nil
}

// RecoveryPoint returns the recovery point, in seconds, at the time of
// the call: it grows between polls while the replica lags.
func (m *ReplicationMetrics) RecoveryPoint() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.behind.IsZero() {
		return 0
	}
	return max(m.now().Sub(m.behind).Seconds(), 0)
}

// Behind records since when the replica lags (zero: it does not).
func (m *ReplicationMetrics) Behind(since time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.behind = since
}

// Replicated records one checkpoint copied (or failed). Objects and bytes
// are counted for failed copies too: they were sent all the same. The
// duration is observed last (see CheckpointMetrics.Saved).
func (m *ReplicationMetrics) Replicated(s blobstorage.ReplicationStats) {
	add(m.copiedBytes, s.Bytes)
	add(m.copied, int64(s.Objects))
	add(m.skippedBytes, s.SkippedBytes)
	add(m.skipped, int64(s.SkippedObjects))
	if s.Err == nil && !s.Completed.IsZero() {
		m.lastReplicatedCompleted.Set(float64(s.Completed.UnixNano()) / 1e9)
	}
	m.duration.WithLabelValues(result(s.Err)).Observe(s.Duration.Seconds())
}
