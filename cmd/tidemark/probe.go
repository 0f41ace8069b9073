package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"

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
	OK                bool   `json:"ok"`
	Error             string `json:"error,omitempty"`
}

func (a *app) probeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "probe",
		Short: "Check that the store enforces conditional writes (If-None-Match, If-Match)",
		Long: `probe checks that the store's endpoint enforces conditional writes, which
Tidemark's fencing, checkpoint pointers and the demo's sink commits rely on: some
S3-compatible servers accept If-None-Match and If-Match and silently ignore them.
On an S3 store it writes a few bytes under _tidemark_probe/ (so it needs write
access), checks that writes whose condition does not hold are refused, and deletes
what it wrote. A file:// store has no endpoint to probe: its conditional writes are
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
			res.Probed, err = blobstore.CheckConditionalWrites(ctx, bs)
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
			case err != nil:
				return err // no verdict: the probe could not run
			case res.Probed:
				res.ConditionalWrites, res.OK = condEnforced, true
			default:
				res.ConditionalWrites, res.OK = condLocal, true
			}
			a.emit(res, func(w io.Writer) {
				switch res.ConditionalWrites {
				case condEnforced:
					fmt.Fprintln(w, "ok: conditional writes enforced (If-None-Match, If-Match)")
				case condLocal:
					fmt.Fprintf(w, "ok: %s has no endpoint to probe: its conditional writes are local and always enforced\n", schemeOf(storeURL))
				default:
					fmt.Fprintf(w, "FAILED: %s\n", res.Error)
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
