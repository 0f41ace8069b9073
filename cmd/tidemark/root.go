package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/internal/logging"
	"github.com/tidemark-io/tidemark/internal/version"
)

// storeEnv is the environment variable that supplies --store.
const storeEnv = "TIDEMARK_STORE"

// app is the state shared by the commands of one run.
type app struct {
	env       env
	store     string        // --store
	output    string        // --output
	timeout   time.Duration // --timeout
	progress  string        // --progress
	logLevel  string        // --log-level
	logFormat string        // --log-format
	logger    *slog.Logger  // from the two above

	// cmdCtx is the command's context under --timeout, cancelled by
	// cancel when run returns.
	cmdCtx context.Context
	cancel context.CancelFunc
}

// errTimedOut is the cause of a command's context when --timeout expires.
var errTimedOut = errors.New("timed out (--timeout)")

// rootCmd builds the command tree; its flags are bound to a's fields.
func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "tidemark",
		Short: "Object-store-native checkpoints for stream processors",
		Long: `tidemark runs a demo stream-processing job on Tidemark checkpoints and
operates on the checkpoints and savepoints of any store.

The store is a URL, given with --store or $TIDEMARK_STORE:
  file:///var/lib/tidemark              a directory (no server needed)
  s3://bucket/prefix?region=eu-west-1   S3 (credentials from the standard AWS chain)
  s3://bucket/prefix?endpoint=http://127.0.0.1:9000&path_style=true   MinIO
Any store URL takes encryption_key_file=PATH (or set $TIDEMARK_ENCRYPTION_KEY to
a base64 key) to encrypt state files and savepoints client-side, AES-256-GCM;
encryption=off opens that URL plain (docs/encryption.md).

Exit codes: 0 ok, 1 error, 2 usage, 3 verification failed (corrupt data, the
demo's exactly-once check failed, or probe found that the endpoint ignores
conditional writes), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM; the
demo drains on SIGTERM and exits 0, or 143 past its --stop-timeout).`,
		Example: `  # the demo: a word-count job that checkpoints to ./.tidemark/store
  tidemark demo
  # inspect what it left
  tidemark ls --store file://$PWD/.tidemark/store
  export TIDEMARK_STORE=file://$PWD/.tidemark/store
  tidemark savepoint create before-upgrade
  tidemark savepoint cp before-upgrade $TIDEMARK_STORE s3://backup/wordcount
  tidemark verify before-upgrade --output json`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// A bare "tidemark" with an unknown argument is a usage error.
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetVersionTemplate("tidemark {{.Version}}\n") // as tidemark version prints it
	root.SuggestionsMinimumDistance = 2                // "did you mean" for a mistyped command
	root.SetOut(a.env.stdout)
	root.SetErr(a.env.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.store, "store", "", "store URL (default $"+storeEnv+")")
	pf.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	pf.StringVar(&a.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format on stderr: text or json")
	pf.StringVar(&a.progress, "progress", "auto", "progress bars on stderr: auto (on a terminal, not with --output json), always or never")
	pf.DurationVar(&a.timeout, "timeout", 0, "give up the whole command after this long, saying it timed out (0: no limit beyond the store's own per-request deadlines)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if a.output != "text" && a.output != "json" {
			return usagef("--output must be text or json, not %q", a.output)
		}
		l, err := logging.New(a.env.stderr, a.logLevel, a.logFormat)
		if err != nil {
			return usageError{err}
		}
		a.logger = l
		// Stores opened from URLs log their clients' diagnostics (the AWS
		// SDK's warnings) through the same logger.
		cmd.SetContext(blobstore.ContextWithLogger(cmd.Context(), l))
		if a.progress != "auto" && a.progress != "always" && a.progress != "never" {
			return usagef("--progress must be auto, always or never, not %q", a.progress)
		}
		if a.timeout < 0 {
			return usagef("--timeout must not be negative")
		}
		if a.timeout > 0 {
			// Every call that does I/O takes this context, so nothing
			// can outlast it. The cancel runs when the process exits.
			a.cmdCtx, a.cancel = context.WithTimeoutCause(cmd.Context(), a.timeout, fmt.Errorf("%w after %v", errTimedOut, a.timeout))
			cmd.SetContext(a.cmdCtx)
		}
		return nil
	}

	root.AddCommand(
		a.demoCmd(),
		a.lsCmd(),
		a.showCmd(),
		a.inspectCmd(),
		a.diffCmd(),
		a.verifyCmd(),
		a.scrubCmd(),
		a.savepointCmd(),
		a.gcCmd(),
		a.replicateCmd(),
		a.probeCmd(),
		a.versionCmd(),
	)
	return root
}

// Argument validators that report usage errors (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		return usagef("unknown command %q for %q\n\nDid you mean this?\n\t%s", args[0], cmd.CommandPath(), strings.Join(s, "\n\t"))
	}
	return usagef("unknown command or argument %q for %q", args[0], cmd.CommandPath())
}

func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s: want %d argument(s) (%s), got %d", cmd.CommandPath(), len(names), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// labelArgs is exactArgs for commands whose first argument is a savepoint
// label: a label that is not a single key segment (one that would escape
// savepoints/) is a usage error too.
func labelArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := exactArgs(names...)(cmd, args); err != nil {
			return err
		}
		if err := checkpoint.ValidateLabel(args[0]); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// storeURL returns --store, or $TIDEMARK_STORE.
func (a *app) storeURL() (string, error) {
	if a.store != "" {
		return a.store, nil
	}
	if u := a.env.getenv(storeEnv); u != "" {
		return u, nil
	}
	return "", usagef("no store: give --store URL or set $%s (for example file:///var/lib/tidemark)", storeEnv)
}

// openStore opens the store named by --store or $TIDEMARK_STORE.
func (a *app) openStore(ctx context.Context) (blobstore.Blobstore, string, error) {
	u, err := a.storeURL()
	if err != nil {
		return nil, "", err
	}
	bs, err := openStoreURL(ctx, u, u)
	if err != nil {
		return nil, "", err
	}
	return bs, u, nil
}

// openReader opens the store of --store or $TIDEMARK_STORE and a
// BlobStorage that reads its checkpoints.
//
// A read command on a store that does not exist fails instead of finding
// it empty: a typo in a path must not look like an empty store. (A bucket
// that does not exist is s3store.ErrBucketNotFound already.)
func (a *app) openReader(ctx context.Context) (blobstore.Blobstore, *blobstorage.Storage, error) {
	u, err := a.storeURL()
	if err != nil {
		return nil, nil, err
	}
	bs, err := openStoreURL(ctx, u, mustExist(u))
	if err != nil {
		return nil, nil, err
	}
	return bs, readStorage(bs), nil
}

// mustExist returns a file:// store URL with must_exist=true unless it
// says otherwise (see filestore.Options.MustExist).
func mustExist(storeURL string) string {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "file" || u.Query().Has("must_exist") {
		return storeURL
	}
	withParam(u, "must_exist", "true")
	return u.String()
}

// readStorage returns a BlobStorage for reading the checkpoints of bs
// (no writer role, no local state).
func readStorage(bs blobstore.Blobstore) *blobstorage.Storage {
	return blobstorage.New(bs, "", blobstorage.Options{})
}

// writeStorage returns a BlobStorage on bs that holds the writer role,
// with local state directories in a temporary directory (removed by the
// returned cleanup). Taking the writer role fences any job writing to the
// same store. Acquire refuses, writing nothing, a store that does not
// enforce conditional writes.
func writeStorage(ctx context.Context, bs blobstore.Blobstore, opts blobstorage.Options) (*blobstorage.Storage, func(), error) {
	dir, err := os.MkdirTemp("", "tidemark-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	s := blobstorage.New(bs, dir, opts)
	if _, err := s.Acquire(ctx); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("take the writer role: %w", err)
	}
	return s, cleanup, nil
}

// emit prints v: as indented JSON with --output json, else with text.
func (a *app) emit(v any, text func(w io.Writer)) {
	if a.output == "json" {
		writeJSON(a.env.stdout, v)
		return
	}
	text(a.env.stdout)
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // keys and URLs as they are: "&" stays "&"
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(w, "{\"error\": %q}\n", err.Error())
	}
}

// newProgress returns a progress bar for a transfer of total bytes (0:
// unknown) on stderr, or nil (which draws nothing) when no bar is wanted:
// --progress never, or auto off a terminal or when the output is JSON.
func (a *app) newProgress(label string, total int64) *progress {
	switch {
	case a.progress == "never", a.progress == "auto" && (!a.env.terminal || a.output == "json"):
		return nil
	}
	return newBar(a.env.stderr, label, total)
}
