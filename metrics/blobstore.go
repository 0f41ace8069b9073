package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidemark-io/tidemark/blobstore"
)

// OtherKeyClass is the key_class of a key whose class is not one of
// BlobstoreOptions.KeyClasses.
const OtherKeyClass = "other"

// BlobstoreOptions configures NewBlobstoreMetrics. The zero value labels
// every family by operation alone.
type BlobstoreOptions struct {
	// KeyClass, when set, adds a key_class label to every family: the
	// class of the operation's key (for List, of its prefix), such as
	// "record", "shared" or "pointer" for a checkpoint layout. It is called
	// for every operation and every read of a body, so it must be quick,
	// and safe for concurrent use.
	KeyClass func(key string) string
	// KeyClasses lists the classes KeyClass returns. Their series are
	// created up front, at 0; a class not listed is counted as
	// OtherKeyClass, so that a classifier's mistake cannot grow the number
	// of series without bound. Required when KeyClass is set.
	KeyClasses []string
}

// BlobstoreMetrics counts what observed stores do, in the families of
// thanos objstore (operations, failures, duration, bytes; labelled by
// operation). It implements blobstore.Observer: Wrap(bs), or
// blobstore.Observe(bs, m), feeds it. One BlobstoreMetrics may observe
// any number of stores, which then add up in its series; to tell stores
// apart, register one per store through prometheus.WrapRegistererWith
// with a label of your own.
type BlobstoreMetrics struct {
	classify func(string) string
	classes  map[string]bool // valid key classes, OtherKeyClass included

	ops      *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec

	// series holds every pre-registered series, so that an operation
	// costs a map lookup on a fixed key rather than hashing label values.
	// It is written only by the constructor.
	series map[seriesKey]*opSeries
}

var _ blobstore.Observer = (*BlobstoreMetrics)(nil)

type seriesKey struct {
	op    blobstore.Op
	class string
}

type opSeries struct {
	ops, failures prometheus.Counter
	duration      prometheus.Observer
	bytes         prometheus.Counter // nil for operations that move no body
}

// DurationBuckets are the upper bounds, in seconds, of the objstore
// operation duration histogram: from a few milliseconds (a HEAD or small
// GET on a nearby endpoint) to two minutes (a large multipart upload).
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// transfers reports whether op moves an object's body, and so has a
// transferred-bytes series.
func transfers(op blobstore.Op) bool {
	switch op {
	case blobstore.OpPut, blobstore.OpPutIfAbsent, blobstore.OpPutIfMatch, blobstore.OpGet, blobstore.OpGetRange:
		return true
	}
	return false
}

// NewBlobstoreMetrics creates the objstore families and registers them on
// reg (nil registers nothing), with a series for every operation in
// blobstore.Ops (and every key class) at 0, so that rates and alerts see
// them before the first operation. It fails, registering nothing, when
// opts is invalid or reg already has these families.
func NewBlobstoreMetrics(reg prometheus.Registerer, opts BlobstoreOptions) (*BlobstoreMetrics, error) {
	labels := []string{"operation"}
	classes := []string{""}
	if opts.KeyClass != nil || len(opts.KeyClasses) > 0 {
		if opts.KeyClass == nil {
			return nil, errors.New("metrics: BlobstoreOptions.KeyClasses is set without KeyClass")
		}
		if len(opts.KeyClasses) == 0 {
			return nil, errors.New("metrics: BlobstoreOptions.KeyClass is set without KeyClasses (the classes it returns)")
		}
		classes = nil
		for _, c := range append(slices.Clone(opts.KeyClasses), OtherKeyClass) {
			if c == "" || !utf8.ValidString(c) {
				return nil, fmt.Errorf("metrics: key class %q: must be a non-empty UTF-8 string", c)
			}
			if !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
		labels = append(labels, "key_class")
	}

	m := &BlobstoreMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "objstore", Name: "operations_total",
			Help: "Operations against the object store, ended successfully or not.",
		}, labels),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "objstore", Name: "operation_failures_total",
			Help: "Operations against the object store that failed. A missing key, a condition that did not hold and a cancelled context are not failures.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "objstore", Name: "operation_duration_seconds",
			Help:    "Duration of object store operations that did not fail; for reads, until the body is closed.",
			Buckets: DurationBuckets,
		}, labels),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "objstore", Name: "operation_transferred_bytes_total",
			Help: "Bytes of object bodies sent (puts) or received (gets), counted as they move.",
		}, labels),
		series: make(map[seriesKey]*opSeries),
	}
	if opts.KeyClass != nil {
		m.classify = opts.KeyClass
		m.classes = make(map[string]bool, len(classes))
		for _, c := range classes {
			m.classes[c] = true
		}
	}
	for _, op := range blobstore.Ops {
		for _, c := range classes {
			m.series[seriesKey{op, c}] = m.newSeries(op, c)
		}
	}
	if err := register(reg, m.ops, m.failures, m.duration, m.bytes); err != nil {
		return nil, err
	}
	return m, nil
}

// labelValues returns the label values of op and class, in the order of
// the families' labels.
func (m *BlobstoreMetrics) labelValues(op blobstore.Op, class string) []string {
	if m.classify == nil {
		return []string{string(op)}
	}
	return []string{string(op), class}
}

func (m *BlobstoreMetrics) newSeries(op blobstore.Op, class string) *opSeries {
	lv := m.labelValues(op, class)
	s := &opSeries{
		ops:      m.ops.WithLabelValues(lv...),
		failures: m.failures.WithLabelValues(lv...),
		duration: m.duration.WithLabelValues(lv...),
	}
	if transfers(op) {
		s.bytes = m.bytes.WithLabelValues(lv...)
	}
	return s
}

// lookup returns the series of op on key.
func (m *BlobstoreMetrics) lookup(op blobstore.Op, key string) *opSeries {
	class := ""
	if m.classify != nil {
		class = m.classify(key)
		if !m.classes[class] {
			class = OtherKeyClass
		}
	}
	if s, ok := m.series[seriesKey{op, class}]; ok {
		return s
	}
	// An operation added to blobstore after this package was built: count
	// it all the same, in series created on first use.
	s := m.newSeries(op, class)
	if s.bytes == nil {
		s.bytes = m.bytes.WithLabelValues(m.labelValues(op, class)...)
	}
	return s
}

// Wrap returns bs observed by m (blobstore.Observe(bs, m)).
func (m *BlobstoreMetrics) Wrap(bs blobstore.Blobstore) blobstore.Blobstore {
	return blobstore.Observe(bs, m)
}

// Transferred implements blobstore.Observer: it adds n to the bytes
// transferred by op.
func (m *BlobstoreMetrics) Transferred(op blobstore.Op, key string, n int) {
	s := m.lookup(op, key)
	if s.bytes != nil {
		s.bytes.Add(float64(n))
	}
}

// Done implements blobstore.Observer: it counts the operation, and either
// its failure or its duration. As in thanos objstore, an expected answer
// (blobstore.IsExpected: a missing key, a condition that did not hold) is
// not a failure, nor is a cancelled context (the caller gave up; nothing
// is wrong with the store); a deadline that ran out is, since a store too
// slow for its callers is worth investigating. The bytes were already
// counted by Transferred.
func (m *BlobstoreMetrics) Done(op blobstore.Op, key string, _ int64, d time.Duration, err error) {
	s := m.lookup(op, key)
	s.ops.Inc()
	switch {
	case err == nil || blobstore.IsExpected(err):
		s.duration.Observe(d.Seconds())
	case errors.Is(err, context.Canceled):
		// Neither a failure nor a duration worth recording.
	default:
		s.failures.Inc()
	}
}
