package integration

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/s3store"
)

// keyAtoms are the pieces the key candidates are built from: the
// characters and names servers treat specially (dots, spaces, '\\',
// Windows' reserved characters, Unicode white space and non-characters,
// MinIO's internal file names).
var keyAtoms = []string{
	".", "..", "...", " ", "  ", `\`, "a", ". ", " .", " . ", ".. ", " ..",
	"\u3000", "\u00a0", "\u2028", "\ufeff", "\u200b", "\U0001F600", "\ufffd", "\uffff", "\U0010ffff",
	"~", ":", "*", "?", `"`, "<", ">", "|", "%", "%2F", "+", "#", "&", "=", ";", "@", "$", "!", "'", "`", "^", "{", "}", "[", "]",
	"xl.meta", "XL.META", "xl.json", "part.1", "__XLDIR__", ".minio.sys", "null", "fs.json", ".tidemark", "_writer",
}

// pairAtoms are the atoms combined in pairs: the ones whose neighbours
// matter (dots, spaces, separators, MinIO's metadata file name).
var pairAtoms = []string{".", "..", "...", " ", `\`, "a", ". ", " .", " . ", ".. ", "\u3000", "\u00a0", "xl.meta", "XL.META"}

// keyCandidates returns the keys built from each atom alone, next to a
// plain segment with the separators '/', '\\' and none, and from every
// two pair atoms.
func keyCandidates() []string {
	seen := map[string]bool{}
	var keys []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, a := range keyAtoms {
		for _, k := range []string{a, "x/" + a, a + "/x", "x" + a, a + "x", `x\` + a, a + `\x`, "x/" + a + "/y"} {
			add(k)
		}
	}
	for _, a := range pairAtoms {
		for _, b := range pairAtoms {
			add(a + b)
			add(a + "/" + b)
			add(a + `\` + b)
		}
	}
	add(`a\..\b`)
	add(`..\x`)
	add(strings.Repeat("s", blobstore.MaxSegmentLen))
	add(strings.Repeat("é", blobstore.MaxSegmentLen/2) + "/x")
	add(blobstoretestLongestKey(blobstore.MaxKeyLen - len("jobs/j/")))
	return keys
}

func blobstoretestLongestKey(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strings.Repeat("k", min(200, n-b.Len())))
	}
	return b.String()
}

// TestStoreKeyRulesHoldOnEveryServer checks the one key rule
// (blobstore.ValidateKey) against real servers: every candidate key it
// accepts must work on MinIO, versitygw and SeaweedFS — put, stat, ranged read,
// listed under itself, deleted — alone, under an existing key ("p" then
// "p/k") and above one ("p/k" then "p"), at the bucket root and under a
// store prefix. Every key it refuses is refused by the store before any
// request. (Finding 9: `a\..\b` and " .. " were valid keys that MinIO
// refuses.)
func TestStoreKeyRulesHoldOnEveryServer(t *testing.T) {
	servers := map[string]func(t *testing.T) s3Server{"minio": minioServer, "versitygw": versitygwServer, "seaweedfs": seaweedfsServer}
	cands := keyCandidates()
	var valid, invalid []string
	for _, k := range cands {
		if blobstore.ValidateKey(k) == nil {
			valid = append(valid, k)
		} else {
			invalid = append(invalid, k)
		}
	}
	t.Logf("%d candidate keys: %d valid, %d refused", len(cands), len(valid), len(invalid))
	for _, name := range []string{"minio", "versitygw", "seaweedfs"} {
		t.Run(name, func(t *testing.T) {
			srv := servers[name](t)
			for _, prefix := range []string{"", "jobs/j"} {
				t.Run(fmt.Sprintf("prefix=%q", prefix), func(t *testing.T) {
					var failed []string
					for i, layer := range unnested(valid) {
						// Each layer in a store of its own: no key of it is
						// another's parent. Filestore and versitygw cannot
						// hold "a" and "a/b" at once and MinIO does not list
						// "a/b" while "a" exists: a rule about pairs of keys,
						// which Tidemark's layouts keep, not about a key.
						s := srv.store(t, prefix, func(o *s3store.Options) { o.MaxAttempts = 1 })
						failed = append(failed, roundTrips(t, s, layer)...)
						if i == 0 {
							for _, k := range invalid {
								if err := s.Put(t.Context(), k, strings.NewReader("x")); !errors.Is(err, blobstore.ErrInvalidKey) {
									t.Errorf("Put(%q) = %v, want ErrInvalidKey", k, err)
								}
							}
						}
					}
					if name == "minio" {
						// An atom as a child of an object and as its parent,
						// where MinIO's layout (an object is a directory
						// holding xl.meta) bites: "a/xl.meta" is refused
						// once "a" exists, "a" once "a/xl.meta" does.
						s := srv.store(t, prefix, func(o *s3store.Options) { o.MaxAttempts = 1 })
						for i, a := range keyAtoms {
							if blobstore.ValidateKey(a) != nil {
								continue
							}
							p, q := fmt.Sprintf("p%03d", i), fmt.Sprintf("q%03d", i)
							for _, k := range []string{p, p + "/" + a, q + "/" + a, q} {
								if err := roundTrip(t, s, k, false); err != nil {
									failed = append(failed, fmt.Sprintf("%q: %v", k, err))
								}
							}
						}
					}
					slices.Sort(failed)
					for _, f := range failed {
						t.Errorf("valid key refused by %s: %s", name, f)
					}
				})
			}
		})
	}
}

// unnested splits keys into layers in which no key is a parent of
// another ("a" and "a/b").
func unnested(keys []string) [][]string {
	var layers [][]string
	var sets []map[string]bool
	for _, k := range keys {
		placed := false
		for i, set := range sets {
			clash := false
			for w := range set {
				if strings.HasPrefix(w, k+"/") || strings.HasPrefix(k, w+"/") {
					clash = true
					break
				}
			}
			if !clash {
				set[k] = true
				layers[i] = append(layers[i], k)
				placed = true
				break
			}
		}
		if !placed {
			sets = append(sets, map[string]bool{k: true})
			layers = append(layers, []string{k})
		}
	}
	return layers
}

// roundTrips runs roundTrip on every key, eight at a time, and returns
// the failures.
func roundTrips(t *testing.T, s *s3store.Store, keys []string) []string {
	var mu sync.Mutex
	var failed []string
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range work {
				if err := roundTrip(t, s, k, true); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%q: %v", k, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return failed
}

// roundTrip puts key, reads it back and, if list, finds it by listing. The
// key stays: the next key of its sequence is written next to it.
func roundTrip(t *testing.T, s *s3store.Store, key string, list bool) error {
	ctx := t.Context()
	body := "v:" + key
	if err := s.Put(ctx, key, strings.NewReader(body)); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	rc, err := s.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != body {
		return fmt.Errorf("get read %q, %v", got, err)
	}
	if !list {
		return nil
	}
	for info, err := range s.List(ctx, key) {
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		if info.Key == key {
			return nil
		}
	}
	return fmt.Errorf("List(%q) does not list the key", key)
}
