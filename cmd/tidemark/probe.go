package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/s3store"
)

// Verdicts of probe (probeResult.ConditionalWrites).
const (
	condEnforced = "enforced" // the endpoint was probed and enforces them
	condLocal    = "local"    // no endpoint: the store enforces them itself
	condIgnored  = "ignored"  // the endpoint accepts and ignores them
)

type probeResult struct {
	Store string `json:"store"`
	// Probed is false for stores without an endpoint to probe.
	Probed            bool   `json:"probed"`
	ConditionalWrites string `json:"conditional_writes"`
	// Findings is what the probe found besides the required conditions,
	// for stores whose probe reports it (S3).
	Findings *probeFindings `json:"findings,omitempty"`
	OK       bool           `json:"ok"`
	Error    string         `json:"error,omitempty"`
}

// probeFindings is blobstore.ProbeReport in the CLI's JSON.
type probeFindings struct {
	// RaceRounds rounds of RaceWriters racing conditional writes of one
	// key, creates and compare-and-swaps, each had exactly one winner.
	RaceRounds  int `json:"race_rounds"`
	RaceWriters int `json:"race_writers"`
	// ConditionalDelete and Checksums are "enforced", "ignored" or
	// "rejected"; Checksums is by algorithm.
	ConditionalDelete string            `json:"conditional_delete"`
	Checksums         map[string]string `json:"checksums"`
	// KeysKeepBackslash is false on a server that stores '\' in a key
	// as '/'.
	KeysKeepBackslash bool `json:"keys_keep_backslash"`
}

func newProbeFindings(r *blobstore.ProbeReport) *probeFindings {
	if r == nil {
		return nil
	}
	f := &probeFindings{
		RaceRounds: r.RaceRounds, RaceWriters: r.RaceWriters,
		ConditionalDelete: string(r.ConditionalDelete), Checksums: map[string]string{},
		KeysKeepBackslash: r.KeysKeepBackslash,
	}
	for alg, v := range r.Checksums {
		f.Checksums[alg] = string(v)
	}
	return f
}

// printFindings writes f as the lines after probe's verdict.
func printFindings(w io.Writer, f *probeFindings) {
	if f == nil {
		return
	}
	fmt.Fprintf(w, "racing writers: %d rounds of %d concurrent creates (If-None-Match: *) and compare-and-swaps (If-Match) of one key, one winner each\n", f.RaceRounds, f.RaceWriters)
	fmt.Fprintf(w, "conditional delete (If-Match on DeleteObject): %s (reported only: Tidemark does not rely on it)\n", f.ConditionalDelete)
	algs := make([]string, 0, len(f.Checksums))
	for alg := range f.Checksums {
		algs = append(algs, alg)
	}
	slices.Sort(algs)
	for i, alg := range algs {
		algs[i] = alg + " " + f.Checksums[alg]
	}
	fmt.Fprintf(w, "upload checksums (x-amz-checksum-*): %s\n", strings.Join(algs, ", "))
	if !f.KeysKeepBackslash {
		fmt.Fprintln(w, `warning: the endpoint stores '\' in a key as '/', so "a\b" and "a/b" are one object; avoid '\' in savepoint labels, operator ids and state file names (SeaweedFS: run it with -s3.allowBackslashInKey)`)
	}
}

func (a *app) probeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "probe",
		Short: "Check that the store enforces conditional writes (If-None-Match, If-Match)",
		Long: `probe checks that the store's endpoint enforces conditional writes, which
Tidemark's fencing, checkpoint pointers and the demo's sink commits rely on: some
S3-compatible servers accept If-None-Match and If-Match and silently ignore them,
or enforce them for one writer at a time but let racing writers all win. On an S3
store it writes a few bytes under _tidemark_probe/ (so it needs write access),
checks that writes whose condition does not hold are refused, that of several
concurrent conditional writes of one key exactly one wins (a few rounds, for
creates and for compare-and-swaps), and deletes what it wrote. It also reports,
without requiring them, whether DeleteObject honours If-Match and whether upload
checksums (CRC32C, CRC64NVME) are verified. docs/servers.md lists what it found on
the servers Tidemark is tested on. A file:// store has no endpoint to probe: its conditional writes are
local (O_EXCL and lock files) and always enforced; probe checks that its directory
exists.

demo, gc and savepoint restore run the same check before they take the writer
role, and refuse to run on an endpoint that ignores the conditions.

Exit 0 when the conditions are enforced, 3 when the endpoint ignores them, 1 when
the probe could not run (endpoint unreachable, access denied, missing bucket).`,
		Example: `  tidemark probe --store 's3://tidemark/wordcount?endpoint=http://127.0.0.1:9000&path_style=true'
  tidemark probe --output json || echo "exit $?"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			storeURL, err := a.storeURL()
			if err != nil {
				return err
			}
			// A missing directory is an error, not a store that passes:
			// probe creates nothing, and checks it is there (below).
			bs, err := openStoreURL(ctx, storeURL, mustExist(storeURL))
			if err != nil {
				return err
			}
			res := probeResult{Store: storeURL}
			var report *blobstore.ProbeReport
			report, res.Probed, err = blobstore.ReportConditionalWrites(ctx, bs)
			res.Findings = newProbeFindings(report)
			if err == nil && !res.Probed {
				// Nothing was sent: check that the store is there at all.
				for _, lerr := range bs.List(ctx, "") {
					err = lerr
					break
				}
			}
			switch {
			case errors.Is(err, s3store.ErrConditionsIgnored):
				res.ConditionalWrites, res.Error = condIgnored, err.Error()
				err = fmt.Errorf("%w: %w", errVerify, err)
			case errors.Is(err, blobstore.ErrSSENotApplied):
				// The conditions held; the encryption asked for did not.
				res.ConditionalWrites, res.Error = condEnforced, err.Error()
				err = fmt.Errorf("%w: %w", errVerify, err)
			case err != nil:
				return err // no verdict: the probe could not run
			case res.Probed:
				res.ConditionalWrites, res.OK = condEnforced, true
			default:
				res.ConditionalWrites, res.OK = condLocal, true
			}
			a.emit(res, func(w io.Writer) {
				switch {
				case res.Error != "":
					fmt.Fprintf(w, "FAILED: %s\n", res.Error)
				case res.ConditionalWrites == condEnforced:
					fmt.Fprintln(w, "ok: conditional writes enforced (If-None-Match, If-Match)")
					printFindings(w, res.Findings)
				default:
					fmt.Fprintf(w, "ok: %s has no endpoint to probe: its conditional writes are local and always enforced\n", schemeOf(storeURL))
				}
			})
			return err
		},
	}
}

// schemeOf names the kind of store of a URL that opened ("file://").
func schemeOf(storeURL string) string {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme == "" {
		return "this store"
	}
	return "a " + u.Scheme + ":// store"
}
