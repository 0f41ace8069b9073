package checkpoint

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/archive"
)

// craftedRecord is a hostile record: id and status valid, one collection
// as large as the attacker likes.
type craftedRecord struct {
	name string
	json []byte
}

func craftRecord(body func(b *bytes.Buffer)) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%q,"status":"completed","timestamp":"2026-01-01T00:00:00Z",`, NewID(7))
	body(&b)
	b.WriteString("}")
	return b.Bytes()
}

// manyOwners lists n owners in state_dirs.
func manyOwners(n int) []byte {
	return craftRecord(func(b *bytes.Buffer) {
		b.WriteString(`"state_dirs":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, `"o%d":"d%d"`, i, i)
		}
		b.WriteString("}")
	})
}

// manyOperators lists n empty operator states.
func manyOperators(n int) []byte {
	return craftRecord(func(b *bytes.Buffer) {
		b.WriteString(`"operators":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.WriteString(strconv.Itoa(i))
			b.WriteString(`":""`)
		}
		b.WriteString("}")
	})
}

// bigSource holds one source value of n base64 bytes.
func bigSource(n int) []byte {
	raw := make([]byte, n/4*3)
	return craftRecord(func(b *bytes.Buffer) {
		b.WriteString(`"source":{"offsets":"`)
		b.WriteString(base64.StdEncoding.EncodeToString(raw))
		b.WriteString(`"}`)
	})
}

func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// peakHeap runs f and returns the peak heap in use above what was in use
// before, sampled every 200 µs, and how long f took.
func peakHeap(f func()) (int64, time.Duration) {
	runtime.GC()
	base := heapInUse()
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			peak = max(peak, heapInUse())
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	start := time.Now()
	f()
	d := time.Since(start)
	close(stop)
	wg.Wait()
	return int64(max(peak, heapInUse())) - int64(base), d
}

// archiveOfRecord wraps rec in a savepoint archive with no files.
func archiveOfRecord(t testing.TB, rec []byte) []byte {
	var buf bytes.Buffer
	m := &archive.Manifest{Version: archive.FormatVersion, Record: json.RawMessage(rec), Files: []archive.File{}}
	if err := archive.Write(t.Context(), &buf, m, nil, archive.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hostileRecords are the three records of issue 23: each cost hundreds
// of megabytes (the operators also 22 s) before the record limits.
func hostileRecords(t testing.TB) []craftedRecord {
	if raceEnabled {
		// The race detector makes scanning 60 MiB take a minute: records
		// just over each limit test the same refusal.
		t.Logf("race detector on: records just over each limit instead of issue 23's")
		return []craftedRecord{
			{"MaxOwners+1 owners", manyOwners(MaxOwners + 1)},
			{"MaxOperators+1 operators", manyOperators(MaxOperators + 1)},
			{"a source value over MaxValueBytes", bigSource(MaxValueBytes + 4)},
		}
	}
	return []craftedRecord{
		{"100,000 owners", manyOwners(100_000)},
		{"4.4 million operators (a 60 MiB record)", manyOperators(4_400_000)},
		{"a 45 MiB source value", bigSource(45 << 20)},
	}
}

func TestHostileRecordsAreRefusedBeforeDecoding(t *testing.T) {
	for _, c := range hostileRecords(t) {
		t.Run(c.name, func(t *testing.T) {
			var err error
			used, d := peakHeap(func() { _, err = DecodeRecord(c.json) })
			t.Logf("record of %d bytes: refused in %v, peak heap %d KiB: %v", len(c.json), d, used>>10, err)
			if !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("DecodeRecord: %v, want an error wrapping ErrRecordTooLarge", err)
			}
			// The refusal allocates nothing in proportion to the record.
			if used > 4<<20 {
				t.Errorf("refusing the record used %d bytes of heap, want under 4 MiB", used)
			}
		})
	}
}

func TestHostileSavepointsAreRefusedWithinTheArchiveBound(t *testing.T) {
	bound := int64(3*archive.DefaultMaxManifestBytes + 16<<20)
	for _, c := range hostileRecords(t) {
		t.Run(c.name, func(t *testing.T) {
			ar := archiveOfRecord(t, c.json)
			dir := t.TempDir()
			var err error
			used, d := peakHeap(func() { _, err = ExtractCheckpoint(t.Context(), NewFileStorage(dir), bytes.NewReader(ar)) })
			t.Logf("savepoint of %d bytes: refused in %v, peak heap %d MiB: %v", len(ar), d, used>>20, err)
			if !errors.Is(err, ErrRecordTooLarge) || !errors.Is(err, archive.ErrCorrupt) {
				t.Fatalf("ExtractCheckpoint: %v, want an error wrapping ErrRecordTooLarge and archive.ErrCorrupt", err)
			}
			if used > bound {
				t.Errorf("peak heap %d bytes, over the documented %d", used, bound)
			}
			if cp, err := NewFileStorage(dir).Load(t.Context()); cp != nil || err != nil {
				t.Errorf("after the refusal the storage holds %v, %v", cp, err)
			}
		})
	}
}

// largestRecords are records at the limits, each accepted.
// largestRecords are records at the limits divided by scale.
func largestRecords(scale int) []craftedRecord {
	name := func(prefix string, i int) string {
		s := fmt.Sprintf("%s%d-", prefix, i)
		return s + strings.Repeat("x", MaxNameBytes-len(s))
	}
	// Owners and state dirs are key segments (at most 251 bytes); deeper
	// dirs would only make the restore create more directories.
	owner := func(i int) string { return name("o", i)[:250] }
	dir := func(i int) string { return name("d", i)[:250] }
	owners := craftRecord(func(b *bytes.Buffer) {
		b.WriteString(`"txn_id":"` + name("t", 0) + `","state_dirs":{`)
		for i := range MaxOwners / scale {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "%q:%q", owner(i), dir(i))
		}
		b.WriteString("}")
	})
	values := craftRecord(func(b *bytes.Buffer) {
		// MaxOperators values sharing MaxValueBytes, one big source value.
		ops := MaxOperators / scale
		per := MaxValueBytes / scale / 2 / ops / 4 * 4
		v := base64.StdEncoding.EncodeToString(make([]byte, per/4*3))
		b.WriteString(`"operators":{`)
		for i := range ops {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "%q:%q", name("op", i), v)
		}
		rest := (MaxValueBytes/scale - per*ops) / 4 * 3
		b.WriteString(`},"source":{"offsets":"` + base64.StdEncoding.EncodeToString(make([]byte, rest)) + `"}`)
	})
	return []craftedRecord{{"MaxOwners owners of the longest names", owners}, {"MaxOperators operators and MaxValueBytes of values", values}}
}

func TestPeakHeapRestoringLargestRecords(t *testing.T) {
	// The bound the record limits document, for DecodeRecord and for
	// the whole restore of a savepoint (ExtractCheckpoint).
	bound := int64(3*MaxRecordBytes + 16<<20)
	scale := 1
	if raceEnabled {
		// The ratio to the record's size is the same at an eighth.
		scale = 8
		t.Logf("race detector on: measuring records of an eighth of the limits")
	}
	for _, c := range largestRecords(scale) {
		t.Run(c.name, func(t *testing.T) {
			var err error
			used, d := peakHeap(func() { _, err = DecodeRecord(c.json) })
			if err != nil {
				t.Fatalf("DecodeRecord of a record at the limits: %v", err)
			}
			t.Logf("record of %d bytes: decoded in %v, peak heap %d MiB", len(c.json), d, used>>20)
			if used > bound {
				t.Errorf("decoding: peak heap %d bytes, over the documented %d", used, bound)
			}
			ar := archiveOfRecord(t, c.json)
			used, d = peakHeap(func() { _, err = ExtractCheckpoint(t.Context(), NewFileStorage(t.TempDir()), bytes.NewReader(ar)) })
			if err != nil {
				t.Fatalf("ExtractCheckpoint of a record at the limits: %v", err)
			}
			t.Logf("savepoint of %d bytes: restored in %v, peak heap %d MiB", len(ar), d, used>>20)
			if used > bound {
				t.Errorf("restoring: peak heap %d bytes, over the documented %d", used, bound)
			}
		})
	}
}

func TestSaveRefusesARecordOverTheLimits(t *testing.T) {
	// Whatever Save writes, a read must accept: else the store is stuck.
	fs := NewFileStorage(t.TempDir())
	ops := make(map[string][]byte, MaxOperators+1)
	for i := range MaxOperators + 1 {
		ops[strconv.Itoa(i)] = nil
	}
	err := fs.Save(t.Context(), &CheckpointData{ID: NewID(1), Operators: ops})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("Save of %d operators: %v, want ErrRecordTooLarge", len(ops), err)
	}
	if cp, err := fs.Load(t.Context()); cp != nil || err != nil {
		t.Fatalf("after the refused Save the storage holds %v, %v", cp, err)
	}
}

func BenchmarkDecodeHostileRecord(b *testing.B) {
	for _, c := range append(hostileRecords(b), largestRecords(1)...) {
		b.Run(c.name, func(b *testing.B) {
			var used int64
			for b.Loop() {
				u, _ := peakHeap(func() { _, _ = DecodeRecord(c.json) })
				used = max(used, u)
			}
			b.ReportMetric(float64(len(c.json))/(1<<20), "record-MiB")
			b.ReportMetric(float64(used)/(1<<20), "peak-heap-MiB")
		})
	}
}
