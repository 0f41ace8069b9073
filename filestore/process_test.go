package filestore_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/filestore"
)

// Cross-process conditional writes: the test binary re-executes itself as
// helper processes (helperProcess, dispatched from TestMain) that share
// one directory. Each
// helper runs several goroutines; every round, all goroutines of all
// processes start together at a wall-clock instant and try the same
// conditional write. Exactly one must win across all processes, and the
// stored bytes and ETag must be the winner's.

const (
	helperEnv    = "FILESTORE_TEST_HELPER"
	racers       = 4 // processes
	perProcess   = 4 // goroutines per process
	raceRounds   = 5
	raceBodySize = 256 << 10 // big enough that writers overlap while copying
)

func TestConditionalWritesAreAtomicAcrossProcesses(t *testing.T) {
	for _, mode := range []string{"absent", "match"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir)
			var etags []string
			for r := range raceRounds {
				etag := "-"
				if mode == "match" {
					var err error
					etag, err = s.PutIfAbsent(t.Context(), roundKey(r), strings.NewReader("base"))
					if err != nil {
						t.Fatal(err)
					}
				}
				etags = append(etags, etag)
			}
			start := time.Now().Add(time.Second) // time for the helpers to start
			outputs := make([]string, racers)
			var wg sync.WaitGroup
			for p := range racers {
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(),
					helperEnv+"=1",
					"FILESTORE_TEST_DIR="+dir,
					"FILESTORE_TEST_MODE="+mode,
					"FILESTORE_TEST_PROCESS="+strconv.Itoa(p),
					"FILESTORE_TEST_ETAGS="+strings.Join(etags, ","),
					"FILESTORE_TEST_START="+strconv.FormatInt(start.UnixNano(), 10),
				)
				wg.Go(func() {
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Errorf("helper %d: %v\n%s", p, err, out)
					}
					outputs[p] = string(out)
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			// Lines: "WIN <round> <writer> <etag>" or "LOSE <round> <writer>".
			winners := map[int][]string{}
			results := 0
			for _, out := range outputs {
				sc := bufio.NewScanner(strings.NewReader(out))
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					if len(f) < 3 || (f[0] != "WIN" && f[0] != "LOSE") {
						continue
					}
					results++
					r, _ := strconv.Atoi(f[1])
					if f[0] == "WIN" {
						winners[r] = append(winners[r], f[2]+" "+f[3])
					}
				}
			}
			if want := racers * perProcess * raceRounds; results != want {
				t.Fatalf("got %d results from the helpers, want %d:\n%s", results, want, strings.Join(outputs, "\n"))
			}
			for r := range raceRounds {
				if len(winners[r]) != 1 {
					t.Fatalf("round %d: %d winners %q, want exactly 1", r, len(winners[r]), winners[r])
				}
				writer, etag, _ := strings.Cut(winners[r][0], " ")
				got := get(t, s, roundKey(r))
				if want := string(body(writer)); got != want {
					t.Fatalf("round %d: stored %.40q..., want the winner %s's bytes", r, got, writer)
				}
				if info, err := s.Stat(t.Context(), roundKey(r)); err != nil || info.ETag != etag {
					t.Fatalf("round %d: Stat = %+v, %v; want the winner's ETag %q", r, info, err, etag)
				}
			}
			if leftover := tree(t, dir); len(leftover) != raceRounds {
				t.Fatalf("directory holds %q, want only the %d keys", leftover, raceRounds)
			}
		})
	}
}

func roundKey(r int) string { return fmt.Sprintf("race-%d", r) }

// body is what writer writes: distinct per writer, and large.
func body(writer string) []byte {
	return bytes.Repeat([]byte(writer+";"), raceBodySize/(len(writer)+1))
}

// TestMain runs the test binary as one of the helper processes of
// TestConditionalWritesAreAtomicAcrossProcesses when it is re-executed by
// it, and as the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(lockHolderEnv) != "" {
		if err := lockHolder(os.Getenv(lockHolderEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "lock holder:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "1" {
		if err := helperProcess(); err != nil {
			fmt.Fprintln(os.Stderr, "helper process:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperProcess is the body of a helper process: it races its goroutines'
// conditional writes round by round and prints one line per write.
func helperProcess() error {
	ctx := context.Background()
	s, err := filestore.New(os.Getenv("FILESTORE_TEST_DIR"))
	if err != nil {
		return err
	}
	// Hold the window between check and rename open long enough that,
	// were the lock missing, racing writers would all pass the check.
	filestore.SetBeforeRenameHook(s, func() { time.Sleep(5 * time.Millisecond) })
	mode := os.Getenv("FILESTORE_TEST_MODE")
	p := os.Getenv("FILESTORE_TEST_PROCESS")
	etags := strings.Split(os.Getenv("FILESTORE_TEST_ETAGS"), ",")
	startNS, err := strconv.ParseInt(os.Getenv("FILESTORE_TEST_START"), 10, 64)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var lines []string
	for r := range raceRounds {
		// Every round starts at the same instant in every process.
		time.Sleep(time.Until(time.Unix(0, startNS).Add(time.Duration(r) * 300 * time.Millisecond)))
		var wg sync.WaitGroup
		for g := range perProcess {
			writer := fmt.Sprintf("p%s-g%d", p, g)
			wg.Go(func() {
				var etag string
				var err error
				if mode == "absent" {
					etag, err = s.PutIfAbsent(ctx, roundKey(r), bytes.NewReader(body(writer)))
				} else {
					etag, err = s.PutIfMatch(ctx, roundKey(r), etags[r], bytes.NewReader(body(writer)))
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					lines = append(lines, fmt.Sprintf("WIN %d %s %s", r, writer, etag))
				case errors.Is(err, blobstore.ErrPreconditionFailed):
					lines = append(lines, fmt.Sprintf("LOSE %d %s", r, writer))
				default:
					lines = append(lines, fmt.Sprintf("ERROR %d %s %v", r, writer, err))
				}
			})
		}
		wg.Wait()
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}
