package blobstorage

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/checkpoint"
)

func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// peakHeap runs f and returns the peak heap in use above what was in use
// before, sampled every 200 µs.
func peakHeap(f func()) int64 {
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
	f()
	close(stop)
	wg.Wait()
	return int64(max(peak, heapInUse())) - int64(base)
}

// craftBlobRecord is a record of one owner "op" whose files, remote
// objects or workers are what body writes.
func craftBlobRecord(body func(b *bytes.Buffer)) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%q,"status":"completed","state_dirs":{"op":"op"},"epoch":1,`, checkpoint.NewID(1))
	body(&b)
	b.WriteString("}")
	return b.Bytes()
}

func repeatList(b *bytes.Buffer, n int, elem func(i int) string) {
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem(i))
	}
}

const zeroDigest = "0000000000000000000000000000000000000000000000000000000000000000"

func TestRecordsOverTheListLimitsAreRefusedBeforeDecoding(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  []byte
	}{
		{"MaxRecordFiles+1 empty file refs", craftBlobRecord(func(b *bytes.Buffer) {
			b.WriteString(`"files":{"op":[`)
			repeatList(b, MaxRecordFiles+1, func(int) string { return "{}" })
			b.WriteString("]}")
		})},
		{"MaxRemoteObjects+1 empty remote refs", craftBlobRecord(func(b *bytes.Buffer) {
			b.WriteString(`"remote":{"op":[`)
			repeatList(b, MaxRemoteObjects+1, func(int) string { return "{}" })
			b.WriteString("]}")
		})},
		{"files of MaxOwners+1 owners", craftBlobRecord(func(b *bytes.Buffer) {
			b.WriteString(`"files":{`)
			repeatList(b, checkpoint.MaxOwners+1, func(i int) string { return fmt.Sprintf(`"o%d":[]`, i) })
			b.WriteString("}")
		})},
		{"MaxOwners+1 workers", craftBlobRecord(func(b *bytes.Buffer) {
			b.WriteString(`"workers":{`)
			repeatList(b, checkpoint.MaxOwners+1, func(i int) string { return fmt.Sprintf(`"o%d":"w"`, i) })
			b.WriteString("}")
		})},
		{"file refs split over a repeated key", craftBlobRecord(func(b *bytes.Buffer) {
			for range 2 {
				b.WriteString(`"files":{"op":[`)
				repeatList(b, MaxRecordFiles/2+1, func(int) string { return "{}" })
				b.WriteString("]},")
			}
			b.WriteString(`"x":0`)
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			used := peakHeap(func() { _, err = decodeRecord(c.rec) })
			t.Logf("record of %d bytes: peak heap %d KiB: %v", len(c.rec), used>>10, err)
			if !errors.Is(err, checkpoint.ErrRecordTooLarge) {
				t.Fatalf("decodeRecord: %v, want an error wrapping checkpoint.ErrRecordTooLarge", err)
			}
			if used > 4<<20 {
				t.Errorf("refusing the record used %d bytes of heap, want under 4 MiB", used)
			}
		})
	}
}

func TestPartOverTheFileLimitIsRefusedBeforeDecoding(t *testing.T) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%q,"epoch":1,"owner":"op","worker":"w","dir":"op","files":[`, checkpoint.NewID(1))
	repeatList(&b, MaxRecordFiles+1, func(int) string { return "{}" })
	b.WriteString("]}")
	if err := checkPartBounds(b.Bytes()); !errors.Is(err, checkpoint.ErrRecordTooLarge) {
		t.Fatalf("checkPartBounds: %v, want an error wrapping checkpoint.ErrRecordTooLarge", err)
	}
}

func TestPeakHeapDecodingLargestRecords(t *testing.T) {
	// The bound the record limits document (package checkpoint).
	bound := int64(3*checkpoint.MaxRecordBytes + 16<<20)
	scale := 1
	if raceEnabled {
		// The ratio to the record's size is the same at an eighth.
		scale = 8
		t.Logf("race detector on: measuring records of an eighth of the limits")
	}
	files := craftBlobRecord(func(b *bytes.Buffer) {
		// As many valid file refs as fit in MaxRecordBytes.
		ref := func(i int) string {
			return fmt.Sprintf(`{"path":"%d","size":0,"sha256":%q,"key":"shared/op/%d"}`, i, zeroDigest, i)
		}
		b.WriteString(`"files":{"op":[`)
		n := (checkpoint.MaxRecordBytes - 200) / (len(ref(1_000_000)) + 1) / scale
		repeatList(b, n, ref)
		b.WriteString("]}")
	})
	remote := craftBlobRecord(func(b *bytes.Buffer) {
		b.WriteString(`"files":{"op":[]},"remote":{"op":[`)
		repeatList(b, MaxRemoteObjects/scale, func(i int) string { return fmt.Sprintf(`{"key":"remote/op/%d","size":0}`, i) })
		b.WriteString("]}")
	})
	for _, c := range []struct {
		name string
		rec  []byte
	}{{"file refs filling MaxRecordBytes", files}, {"MaxRemoteObjects remote refs", remote}} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.rec) > checkpoint.MaxRecordBytes {
				t.Fatalf("test record of %d bytes is over the limit", len(c.rec))
			}
			var err error
			start := time.Now()
			used := peakHeap(func() { _, err = decodeRecord(c.rec) })
			if err != nil {
				t.Fatalf("decodeRecord of a record at the limits: %v", strings.TrimSpace(err.Error()[:min(len(err.Error()), 300)]))
			}
			t.Logf("record of %d bytes: decoded in %v, peak heap %d MiB", len(c.rec), time.Since(start), used>>20)
			if used > bound {
				t.Errorf("peak heap %d bytes, over the documented %d", used, bound)
			}
		})
	}
}

func TestHugeRecordOrPointerIsRefusedWithoutReadingItWhole(t *testing.T) {
	bs := memstore.New()
	s := New(bs, t.TempDir(), Options{})
	huge := bytes.Repeat([]byte{' '}, checkpoint.MaxRecordBytes+1)
	id := checkpoint.NewID(1)
	for _, key := range []string{recordKey(id), keyLatestCompleted} {
		if err := bs.Put(t.Context(), key, bytes.NewReader(huge)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.LoadRecord(t.Context(), id); !errors.Is(err, checkpoint.ErrRecordTooLarge) {
		t.Errorf("LoadRecord of a record over MaxRecordBytes: %v, want ErrRecordTooLarge", err)
	}
	if _, err := s.LoadLatestCompleted(t.Context()); !errors.Is(err, checkpoint.ErrRecordTooLarge) {
		t.Errorf("LoadLatestCompleted through a pointer over MaxRecordBytes: %v, want ErrRecordTooLarge", err)
	}
}
