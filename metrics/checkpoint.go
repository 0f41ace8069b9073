package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidemark-io/tidemark/blobstorage"
)

// Values of the result label.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// CheckpointDurationBuckets are the upper bounds, in seconds, of the
// save, restore and GC duration histograms: from an incremental
// checkpoint of a small state (tens of milliseconds) to a full one of
// tens of GiB (ten minutes).
var CheckpointDurationBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// RequestBuckets are the upper bounds of the requests-per-checkpoint
// histogram: 4 to 4096 requests (a 1 GiB full checkpoint makes about 220,
// an incremental one about 30).
var RequestBuckets = prometheus.ExponentialBuckets(4, 2, 11)

// CheckpointMetrics counts what a checkpoint Storage does: saves,
// restores, garbage collections and fencing. It implements the Storage's
// Observer interface; its methods are safe for concurrent use.
type CheckpointMetrics struct {
	saveDuration    *prometheus.HistogramVec
	partDuration    *prometheus.HistogramVec
	restoreDuration *prometheus.HistogramVec
	gcDuration      *prometheus.HistogramVec
	requests        prometheus.Histogram

	uploadedBytes, reusedBytes prometheus.Counter
	uploadedFiles, reusedFiles prometheus.Counter
	restoredBytes              prometheus.Counter
	restoredFiles              prometheus.Counter

	gcDeleted, gcDeletedBytes   prometheus.Counter
	gcAbortedUploads, gcExpired prometheus.Counter

	fenced        prometheus.Counter
	lastCompleted prometheus.Gauge

	now func() time.Time // time.Now; tests replace it
}

var _ blobstorage.PartObserver = (*CheckpointMetrics)(nil)

// NewCheckpointMetrics creates the checkpoint families and registers them
// on reg (nil registers nothing), with both result series of every
// histogram at 0. It fails, registering nothing, when reg already has
// these families.
func NewCheckpointMetrics(reg prometheus.Registerer) (*CheckpointMetrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "checkpoint", Name: name, Help: help})
	}
	durations := func(name, help string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "checkpoint", Name: name, Help: help,
			Buckets: CheckpointDurationBuckets,
		}, []string{"result"})
		h.WithLabelValues(ResultSuccess)
		h.WithLabelValues(ResultFailure)
		return h
	}
	m := &CheckpointMetrics{
		saveDuration: durations("save_duration_seconds",
			"Duration of checkpoint saves, by result; its _count is the number of saves (a two-phase checkpoint is two: its prepared record and its completion)."),
		partDuration: durations("part_save_duration_seconds",
			"Duration of the parts this process saved as a worker of a job spanning hosts (blobstorage.Worker.SavePart), by result; its _count is the number of parts."),
		restoreDuration: durations("restore_duration_seconds",
			"Duration of restores of a checkpoint into a local directory, by result."),
		gcDuration: durations("gc_duration_seconds",
			"Duration of garbage collections, by result."),
		requests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "checkpoint", Name: "save_requests",
			Help:    "Object store requests made by one checkpoint save.",
			Buckets: RequestBuckets,
		}),
		uploadedBytes: counter("uploaded_bytes_total", "Bytes of state files uploaded by checkpoint saves and worker parts."),
		uploadedFiles: counter("uploaded_files_total", "State files uploaded by checkpoint saves and worker parts."),
		reusedBytes:   counter("reused_bytes_total", "Bytes of state files that checkpoint saves and worker parts referenced from earlier checkpoints instead of uploading."),
		reusedFiles:   counter("reused_files_total", "State files that checkpoint saves and worker parts referenced from earlier checkpoints instead of uploading."),
		restoredBytes: counter("restored_bytes_total", "Bytes of state files downloaded and verified by restores."),
		restoredFiles: counter("restored_files_total", "State files downloaded and verified by restores."),

		gcDeleted:        counter("gc_deleted_objects_total", "Objects deleted by garbage collection."),
		gcDeletedBytes:   counter("gc_deleted_bytes_total", "Bytes of the objects deleted by garbage collection."),
		gcAbortedUploads: counter("gc_aborted_uploads_total", "Incomplete multipart uploads aborted by garbage collection."),
		gcExpired:        counter("gc_expired_pins_total", "Restore pins that garbage collection found expired and removed."),

		fenced: counter("fenced_total", "Times this writer found itself fenced: another node raised the writer epoch, so this one must stop."),
		lastCompleted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "checkpoint", Name: "last_completed_timestamp_seconds",
			Help: "Unix time at which this process last completed a checkpoint (0 before the first); alert on time() minus it.",
		}),
		now: time.Now,
	}
	if err := register(reg,
		m.saveDuration, m.partDuration, m.restoreDuration, m.gcDuration, m.requests,
		m.uploadedBytes, m.uploadedFiles, m.reusedBytes, m.reusedFiles,
		m.restoredBytes, m.restoredFiles,
		m.gcDeleted, m.gcDeletedBytes, m.gcAbortedUploads, m.gcExpired,
		m.fenced, m.lastCompleted,
	); err != nil {
		return nil, err
	}
	return m, nil
}

// add adds n to c. A negative n, which no correct Storage reports, is
// dropped rather than passed on: Counter.Add panics on it.
func add(c prometheus.Counter, n int64) {
	if n > 0 {
		c.Add(float64(n))
	}
}

func result(err error) string {
	if err != nil {
		return ResultFailure
	}
	return ResultSuccess
}

// Saved records a save. The files and bytes are counted for failed saves
// too: they were uploaded (or found) all the same, and they are what the
// store was asked to do. The last-completed time moves only for a save
// that completed the checkpoint without error.
//
// The duration is observed last: a scrape is not atomic across families,
// so one that sees a save counted (its duration's _count) must also see
// everything else that save recorded.
func (m *CheckpointMetrics) Saved(s blobstorage.SaveStats) {
	if s.Completed && s.Err == nil {
		m.lastCompleted.Set(float64(m.now().UnixNano()) / 1e9)
	}
	add(m.uploadedFiles, int64(s.UploadedFiles))
	add(m.uploadedBytes, s.UploadedBytes)
	add(m.reusedFiles, int64(s.ReusedFiles))
	add(m.reusedBytes, s.ReusedBytes)
	m.requests.Observe(float64(s.Requests))
	m.saveDuration.WithLabelValues(result(s.Err)).Observe(s.Duration.Seconds())
}

// SavedPart records a worker's part of a checkpoint, counting its files
// and bytes with the saves' (whatever its result, as Saved does). A part
// completes no checkpoint: the coordinator's Save does.
func (m *CheckpointMetrics) SavedPart(s blobstorage.PartStats) {
	add(m.uploadedFiles, int64(s.UploadedFiles))
	add(m.uploadedBytes, s.UploadedBytes)
	add(m.reusedFiles, int64(s.ReusedFiles))
	add(m.reusedBytes, s.ReusedBytes)
	m.partDuration.WithLabelValues(result(s.Err)).Observe(s.Duration.Seconds())
}

// Restored records a restore; its files and bytes are counted whatever
// its result, as Saved counts a save's.
func (m *CheckpointMetrics) Restored(s blobstorage.RestoreStats) {
	add(m.restoredFiles, int64(s.Files))
	add(m.restoredBytes, s.Bytes)
	m.restoreDuration.WithLabelValues(result(s.Err)).Observe(s.Duration.Seconds())
}

// Collected records a garbage collection, counting what it deleted even
// when it failed part way.
func (m *CheckpointMetrics) Collected(s blobstorage.GCStats) {
	add(m.gcDeleted, int64(s.Deleted))
	add(m.gcDeletedBytes, s.DeletedBytes)
	add(m.gcAbortedUploads, int64(s.AbortedUploads))
	add(m.gcExpired, int64(s.ExpiredPins))
	m.gcDuration.WithLabelValues(result(s.Err)).Observe(s.Duration.Seconds())
}

// Fenced records that this writer was fenced by a newer epoch.
func (m *CheckpointMetrics) Fenced(epoch uint64) {
	m.fenced.Inc()
}
