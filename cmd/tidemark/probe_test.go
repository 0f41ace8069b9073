package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/blobstore/memstore"
	"github.com/tidemark-io/tidemark/integration/miniotest"
	"github.com/tidemark-io/tidemark/s3store"
)

// probeScheme names test stores with a Probe: probetest://enforced,
// probetest://ignored (the endpoint ignores conditional writes) and
// probetest://unreachable (the probe cannot run). Each Open is a new,
// empty memstore; with ?marked it holds a Tidemark store's mark (an
// existing store, as gc wants).
const probeScheme = "probetest"

func init() {
	testSchemes = append(testSchemes, probeScheme)
	blobstore.Register(probeScheme, func(ctx context.Context, u *url.URL) (blobstore.Blobstore, error) {
		p := &probing{Blobstore: memstore.New()}
		if u.Query().Has("marked") {
			if err := p.Put(ctx, "_tidemark", strings.NewReader(`{"format":1}`)); err != nil {
				return nil, err
			}
		}
		switch u.Host {
		case "enforced":
		case "ignored":
			p.err = fmt.Errorf("%w: bucket \"b\" at %s: If-None-Match: * on an existing object succeeded", s3store.ErrConditionsIgnored, u)
		case "unreachable":
			p.err = fmt.Errorf("s3store: probe bucket \"b\" at %s: %w", u, s3store.ErrUnreachable)
		default:
			return nil, fmt.Errorf("probetest: unknown host %q", u.Host)
		}
		return p, nil
	})
}

// probing is a Blobstore whose Probe returns err, standing in for an
// s3store.Store on an endpoint that enforces (nil) or ignores conditional
// writes, or cannot be probed.
type probing struct {
	blobstore.Blobstore
	err error
}

func (p *probing) Probe(context.Context) error { return p.err }

const refusal = "this endpoint does not enforce conditional writes (If-None-Match/If-Match); Tidemark's fencing would be unsafe on it: "

func TestProbeOnMinIOSaysConditionalWritesAreEnforcedAndLeavesNothing(t *testing.T) {
	store := s3URL(t, "probed")
	out := must(t, store, "probe")
	// MinIO enforces both checksums and ignores If-Match on DeleteObject
	// (docs/servers.md); the probe reports it without refusing.
	want := "ok: conditional writes enforced (If-None-Match, If-Match)\n" +
		"racing writers: 3 rounds of 4 concurrent creates (If-None-Match: *) and compare-and-swaps (If-Match) of one key, one winner each\n" +
		"conditional delete (If-Match on DeleteObject): ignored (reported only: Tidemark does not rely on it)\n" +
		"upload checksums (x-amz-checksum-*): CRC32C enforced, CRC64NVME enforced\n"
	if out != want {
		t.Fatalf("probe on MinIO printed\n%s\nwant\n%s", out, want)
	}
	var res probeResult
	mustJSON(t, store, &res, "probe")
	wantRes := probeResult{Store: store, Probed: true, ConditionalWrites: "enforced", OK: true, Findings: &probeFindings{
		RaceRounds: 3, RaceWriters: 4, ConditionalDelete: "ignored",
		Checksums:         map[string]string{"CRC32C": "enforced", "CRC64NVME": "enforced"},
		KeysKeepBackslash: true,
	}}
	if !reflect.DeepEqual(res, wantRes) {
		t.Fatalf("probe --output json on MinIO: %+v (findings %+v)", res, res.Findings)
	}
	for info, err := range openURL(t, store).List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("probe left %q in the store", info.Key)
	}
}

func TestProbeOnAFileStoreSaysItsConditionsAreLocal(t *testing.T) {
	store := fileURL(t.TempDir())
	out := must(t, store, "probe")
	if out != "ok: a file:// store has no endpoint to probe: its conditional writes are local and always enforced\n" {
		t.Fatalf("probe on a file store printed %q", out)
	}
	var res probeResult
	mustJSON(t, store, &res, "probe")
	if res != (probeResult{Store: store, ConditionalWrites: "local", OK: true}) {
		t.Fatalf("probe --output json on a file store: %+v", res)
	}
}

func TestProbeExitsThreeWhenTheEndpointIgnoresConditionalWrites(t *testing.T) {
	store := probeScheme + "://ignored"
	out, errOut, code := tm(t, store, "probe")
	if code != exitVerify || !strings.HasPrefix(out, "FAILED: "+refusal) || !strings.Contains(errOut, refusal) {
		t.Fatalf("probe: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitVerify, out, errOut)
	}
	out, errOut, code = tm(t, store, "probe", "--output", "json")
	var res probeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitVerify {
		t.Fatalf("probe --output json: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	if res.OK || !res.Probed || res.ConditionalWrites != "ignored" || !strings.HasPrefix(res.Error, refusal) {
		t.Fatalf("probe --output json: %+v", res)
	}
}

func TestProbeExitsOneWhenItCannotRun(t *testing.T) {
	out, errOut, code := tm(t, probeScheme+"://unreachable", "probe")
	if code != exitError || out != "" || !strings.Contains(errOut, "could not check that the endpoint enforces conditional writes") {
		t.Fatalf("probe: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitError, out, errOut)
	}
}

func TestProbeOnAStoreWhoseEndpointEnforcesThem(t *testing.T) {
	if out := must(t, probeScheme+"://enforced", "probe"); out != "ok: conditional writes enforced (If-None-Match, If-Match)\n" {
		t.Fatalf("probe printed %q", out)
	}
}

func TestCommandsThatTakeTheWriterRoleRefuseAnEndpointThatIgnoresConditions(t *testing.T) {
	store := probeScheme + "://ignored"
	// A good savepoint elsewhere: restore verifies it, then refuses to
	// take the writer role on the endpoint.
	src := ranDemo(t)
	must(t, src, "savepoint", "create", "v1")
	for _, args := range [][]string{
		demoArgs(t.TempDir(), store),
		// gc takes the role only with --fence (plain gc --confirm needs none).
		{"gc", "--confirm", "--fence", "--keep", "1", "--store", store + "?marked"},
		{"savepoint", "restore", "v1", "--from", src},
	} {
		t.Run(args[0], func(t *testing.T) {
			out, errOut, code := tm(t, store, args...)
			if code != exitError || out != "" || !strings.Contains(errOut, refusal) {
				t.Fatalf("tidemark %s: exit %d, want %d and the refusal\nstdout: %s\nstderr: %s",
					strings.Join(args, " "), code, exitError, out, errOut)
			}
		})
	}
}

func TestCommandsThatTakeTheWriterRoleRunOnAnEndpointThatEnforcesConditions(t *testing.T) {
	store := probeScheme + "://enforced"
	// Each Open is a new store: the demo completes, gc finds nothing to
	// delete in a marked one; both got past the probe and took the writer
	// role.
	out := must(t, "", demoArgs(t.TempDir(), store)...)
	if !strings.Contains(out, "exactly-once: OK") {
		t.Fatalf("demo printed %q", out)
	}
	must(t, store+"?marked", "gc", "--confirm", "--keep", "1")
}

// On versitygw, which stores an object asked to be encrypted (sse=AES256)
// in the clear and answers 200, probe fails with exit 3 naming the
// setting (Storage.Acquire runs the same probe, so the writer commands
// refuse the store alike).
func TestProbeExitsThreeWhenTheEndpointIgnoresSSE(t *testing.T) {
	srv := miniotest.SharedVersity(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	q := url.Values{"endpoint": {srv.Endpoint}, "path_style": {"true"}, "sse": {"AES256"}}
	store := "s3://" + srv.NewBucket(t) + "/job?" + q.Encode()
	const why = "this endpoint does not apply the server-side encryption configured"
	out, errOut, code := tm(t, store, "probe")
	if code != exitVerify || !strings.HasPrefix(out, "FAILED: "+why) || !strings.Contains(out, "AES256") {
		t.Fatalf("probe with sse=AES256 on versitygw: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitVerify, out, errOut)
	}
	var res probeResult
	out, _, _ = tm(t, store, "probe", "--output", "json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.OK || res.ConditionalWrites != condEnforced || !strings.HasPrefix(res.Error, why) {
		t.Fatalf("probe --output json: %+v, %v", res, err)
	}
}
