package s3store

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// genReader yields size bytes by repeating one block, so that a 1 GiB
// input costs a memcpy per byte rather than a random number generator or
// a gigabyte of memory. It has only Read: nothing can seek it or learn its
// length, so whoever reads it must stream.
type genReader struct {
	block []byte
	left  int64
	off   int
}

func newGenReader(block []byte, size int64) *genReader {
	return &genReader{block: block, left: size}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n := copy(p, g.block[g.off:])
	g.off = (g.off + n) % len(g.block)
	g.left -= int64(n)
	return n, nil
}

// discardAt is an io.WriterAt that drops what it is given, so that a
// download benchmark measures the transfer and not the local disk.
type discardAt struct{}

func (discardAt) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// memSampleEvery is how often a meter samples. Coarse on purpose: the
// sampler shares two cores with the benchmark and MinIO. The RSS peak
// does not depend on it (VmHWM records the true peak); the heap peak
// could miss a spike shorter than this, but the buffers that matter live
// for a whole part transfer.
const memSampleEvery = 5 * time.Millisecond

const heapObjectsMetric = "/memory/classes/heap/objects:bytes"

// meter measures one benchmark: the peak resident set size of this
// process and the peak of the Go heap's object bytes from start to stop,
// relative to their values at start, and the CPU time this process and
// MinIO spent meanwhile.
type meter struct {
	baseRSS, baseHeap uint64
	peakRSS, peakHeap uint64
	hwmReset          bool // VmHWM was reset at start, so it is the peak since then

	// CPU ticks (USER_HZ, 10 ms) used so far by this process and by the
	// MinIO process, if it is a child we can see (process mode).
	cpu0, minio0 int64
	minioPID     int

	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// startMeter first returns freed memory to the OS, so the baseline does
// not include what earlier benchmarks left in the heap, then resets the
// kernel's high-water mark (VmHWM, through /proc/self/clear_refs) and
// samples VmRSS and the heap until stop.
func startMeter(b *testing.B, minioPID int) *meter {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	m := &meter{stopc: make(chan struct{}), minioPID: minioPID}
	m.cpu0, _ = cpuTicks("self")
	if minioPID > 0 {
		m.minio0, _ = cpuTicks(strconv.Itoa(minioPID))
	}
	rss, _, err := procStatus()
	if err != nil {
		b.Fatalf("read /proc/self/status: %v", err)
	}
	m.baseRSS, m.peakRSS = rss, rss
	m.baseHeap = heapObjects()
	m.peakHeap = m.baseHeap
	// "5" resets the peak RSS to the current RSS (Linux ≥ 4.0).
	m.hwmReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	m.wg.Go(func() {
		t := time.NewTicker(memSampleEvery)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.stopc:
				return
			case <-t.C:
			}
		}
	})
	b.Cleanup(func() { m.stop() }) // a benchmark that fails stops it here
	return m
}

func (m *meter) sample() {
	if rss, _, err := procStatus(); err == nil {
		m.peakRSS = max(m.peakRSS, rss)
	}
	m.peakHeap = max(m.peakHeap, heapObjects())
}

// stop ends the sampling and returns the growth of RSS and of the heap
// over their baselines, in bytes.
func (m *meter) stop() (rssGrowth, heapGrowth uint64) {
	m.once.Do(func() { close(m.stopc) })
	m.wg.Wait()
	m.sample()
	if _, hwm, err := procStatus(); err == nil && m.hwmReset {
		m.peakRSS = max(m.peakRSS, hwm)
	}
	return m.peakRSS - m.baseRSS, m.peakHeap - m.baseHeap
}

// report stops m and reports its peaks in MiB, with the bound the store
// promises for comparison when bound > 0, and the CPU time per operation
// of this process (cpu-ms/op) and of MinIO (minio-cpu-ms/op, process
// mode only). Call it after the b.Loop loop, when b.N is final.
func (m *meter) report(b *testing.B, bound int64) {
	b.Helper()
	rss, heap := m.stop()
	if t, err := cpuTicks("self"); err == nil && b.N > 0 {
		b.ReportMetric(float64(t-m.cpu0)*10/float64(b.N), "cpu-ms/op")
	}
	if m.minioPID > 0 {
		if t, err := cpuTicks(strconv.Itoa(m.minioPID)); err == nil && b.N > 0 {
			b.ReportMetric(float64(t-m.minio0)*10/float64(b.N), "minio-cpu-ms/op")
		}
	}
	b.ReportMetric(float64(rss)/(1<<20), "peak-MiB")
	b.ReportMetric(float64(heap)/(1<<20), "heap-peak-MiB")
	if bound > 0 {
		b.ReportMetric(float64(bound)/(1<<20), "bound-MiB")
	}
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: heapObjectsMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// statusBuf holds /proc/self/status while procStatus parses it. The
// sampler reads the file every few milliseconds: os.ReadFile and a
// bufio.Scanner allocated about 10 MB over a 1 GiB upload, which showed
// up as garbage in the heap and RSS peaks being measured.
var (
	statusMu  sync.Mutex
	statusBuf = make([]byte, 16<<10)
)

// procStatus returns VmRSS and VmHWM of this process in bytes.
func procStatus() (rss, hwm uint64, err error) {
	statusMu.Lock()
	defer statusMu.Unlock()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	n, err := io.ReadFull(f, statusBuf)
	f.Close()
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		if err == nil {
			err = fmt.Errorf("/proc/self/status larger than %d bytes", len(statusBuf))
		}
		return 0, 0, err
	}
	for line := range bytes.Lines(statusBuf[:n]) {
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(line) // "VmRSS:", "123456", "kB"
		if len(f) < 2 {
			continue
		}
		var kb uint64
		for _, c := range f[1] {
			if c < '0' || c > '9' {
				return 0, 0, fmt.Errorf("parse /proc/self/status: %q", line)
			}
			kb = kb*10 + uint64(c-'0')
		}
		*dst = kb << 10
	}
	return rss, hwm, nil
}

// cpuTicks returns utime+stime of /proc/<pid>/stat, all threads, in
// USER_HZ ticks (100 per second on Linux).
func cpuTicks(pid string) (int64, error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields after it start at 3 (state). utime and stime are 14 and 15.
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%s/stat", pid)
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return u + st, nil
}
