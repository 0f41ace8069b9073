package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// scrubCmd is `tidemark scrub`.
func (a *app) scrubCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "scrub",
		Short: "Read every checkpoint and savepoint in the store; report damage and orphans",
		Long: `scrub checks a whole store and writes nothing but a savepoint lock while it
reads. It reads every object every checkpoint record references (each once, however
many checkpoints share it), checks state files against their SHA-256 and remote
objects against their size and the store's own checksum, and reads every savepoint
(each content object once, however many savepoints share it) against its manifest.
It names each missing or corrupt key with the checkpoints that reference it.

It also lists orphans: checkpoint files, shared and remote objects that no record
references and no pin protects. A running job's uploads in progress and its remote
state not yet in a checkpoint are among them until its next checkpoint; tidemark gc
deletes the others after its grace period. Orphans are not damage.

Exit 3 when anything is missing or corrupt (a record that cannot be read included),
0 otherwise.`,
		Example: `  tidemark scrub --store s3://backup/wordcount
  tidemark scrub --output json | jq '.damaged[].key'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			_, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			rep, err := s.Scrub(ctx)
			if err != nil {
				return err
			}
			a.emit(scrubJSON{ScrubReport: rep, OK: rep.OK()}, func(w io.Writer) { writeScrub(w, rep) })
			if !rep.OK() {
				return quietError{fmt.Errorf("%w: scrub found damage", errVerify)}
			}
			return nil
		},
	}
}

// scrubJSON is scrub's JSON output: the report and its verdict.
type scrubJSON struct {
	*blobstorage.ScrubReport
	OK bool `json:"ok"`
}

func writeScrub(w io.Writer, rep *blobstorage.ScrubReport) {
	fmt.Fprintf(w, "scrub: %s, %s, %s (%s) read\n", plural(len(rep.Checkpoints), "checkpoint"),
		plural(len(rep.Savepoints), "savepoint"), plural(rep.Objects, "object"), humanBytes(rep.Bytes))
	for _, d := range rep.Records {
		fmt.Fprintf(w, "  unreadable record %s: %s\n", d.Key, d.Reason)
	}
	writeDamage(w, rep.Damaged)
	for _, sp := range rep.Savepoints {
		if sp.Damage != nil {
			fmt.Fprintf(w, "  savepoint %s: FAILED: %s\n", sp.Label, sp.Damage.Reason)
		}
	}
	switch {
	case len(rep.Records) > 0:
		fmt.Fprintln(w, "orphans: not listed (what the unreadable records reference is unknown)")
	case len(rep.Orphans) == 0:
		fmt.Fprintln(w, "orphans: none")
	default:
		var n int64
		for _, o := range rep.Orphans {
			n += o.Size
		}
		fmt.Fprintf(w, "orphans: %s (%s) no record references:\n", plural(len(rep.Orphans), "object"), humanBytes(n))
		for _, o := range rep.Orphans {
			fmt.Fprintf(w, "  %s  %s  %s\n", o.Key, humanBytes(o.Size), o.ModTime.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
	if rep.OK() {
		fmt.Fprintln(w, "OK")
	} else {
		fmt.Fprintln(w, "FAILED: missing or corrupt objects (above)")
	}
}
