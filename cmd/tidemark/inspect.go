package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tidemark-io/tidemark/blobstorage"
	"github.com/tidemark-io/tidemark/blobstore"
	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// snapshot is the state of one checkpoint or savepoint, open read-only
// in a temporary directory.
type snapshot struct {
	Name       string `json:"name"`
	Kind       string `json:"kind"` // "checkpoint" or "savepoint"
	Checkpoint string `json:"checkpoint"`
	Remote     bool   `json:"remote"` // tables read in place from the store
	st         *state.Store
	cleanup    func()
}

func (s *snapshot) close() {
	if s.st != nil {
		_ = s.st.Close()
	}
	s.cleanup()
}

// openSnapshot opens the state of the checkpoint or savepoint name
// read-only. A checkpoint's local files are downloaded (its whole state
// in local mode; in remote mode its tables are read in place, block by
// block, so it opens at once); a savepoint is extracted first. Nothing is
// written to the store but a restore pin, removed at the end.
func (a *app) openSnapshot(ctx context.Context, bs blobstore.Blobstore, s *blobstorage.Storage, name string) (*snapshot, error) {
	tmp, err := os.MkdirTemp("", "tidemark-inspect-")
	if err != nil {
		return nil, err
	}
	snap := &snapshot{Name: name, cleanup: func() { _ = os.RemoveAll(tmp) }}
	fail := func(err error) (*snapshot, error) {
		snap.close()
		return nil, err
	}
	rec, err := loadNamed(ctx, s, name)
	switch {
	case err == nil:
		snap.Kind, snap.Checkpoint, snap.Remote = "checkpoint", rec.ID, len(rec.Remote) > 0
		node := blobstorage.New(bs, filepath.Join(tmp, "ckpt"), blobstorage.Options{})
		if err := node.Restore(ctx, rec.ID); err != nil {
			return fail(err)
		}
		snap.st, err = openReadOnly(ctx, node.StateDir(rec.ID), filepath.Join(tmp, "work"), bs, snap.Remote)
		if err != nil {
			return fail(err)
		}
		return snap, nil
	case isAlias(name) || !errors.Is(err, checkpoint.ErrNotFound) || checkpoint.ValidateLabel(name) != nil:
		return fail(err)
	}
	// Not a checkpoint of the store: a savepoint, or nothing.
	if ok, err := bs.Exists(ctx, checkpoint.SavepointKey(name)); err != nil {
		return fail(err)
	} else if !ok {
		return fail(fmt.Errorf("no checkpoint or savepoint named %q in the store (tidemark ls lists them)", name))
	}
	snap.Kind = "savepoint"
	if ok, err := openSavepointInPlace(ctx, bs, name, tmp, snap); err != nil {
		return fail(err)
	} else if ok {
		return snap, nil
	}
	fsDir := filepath.Join(tmp, "file")
	id, err := checkpoint.RestoreSavepoint(ctx, checkpoint.NewFileStorage(fsDir), bs, name)
	if err == nil {
		snap.Checkpoint = id
		snap.st, err = openReadOnly(ctx, checkpoint.NewFileStorage(fsDir).StateDir(id), filepath.Join(tmp, "work"), nil, false)
		if err != nil {
			return fail(err)
		}
		return snap, nil
	}
	if !errors.Is(err, checkpoint.ErrRemoteState) {
		return fail(err)
	}
	// State in remote mode: extract it into a scratch store of its own,
	// its objects included, and read them there.
	scratch, err := blobstore.Open(ctx, (&url.URL{Scheme: "file", Path: filepath.Join(tmp, "store")}).String())
	if err != nil {
		return fail(err)
	}
	dst := blobstorage.New(scratch, filepath.Join(tmp, "ckpt"), blobstorage.Options{})
	if _, err := dst.Acquire(ctx); err != nil {
		return fail(err)
	}
	if id, err = checkpoint.RestoreSavepoint(ctx, dst, bs, name); err != nil {
		return fail(err)
	}
	snap.Checkpoint, snap.Remote = id, true
	snap.st, err = openReadOnly(ctx, dst.StateDir(id), filepath.Join(tmp, "work"), scratch, true)
	if err != nil {
		return fail(err)
	}
	return snap, nil
}

// openReadOnly opens the state directory dir of a checkpoint read-only,
// through work (Pebble needs a directory of its own); remote state reads
// its tables from bs.
func openReadOnly(ctx context.Context, dir, work string, bs blobstore.Blobstore, remote bool) (*state.Store, error) {
	opts := state.Options{ReadOnly: true}
	if remote {
		opts.Remote = state.RemoteOptions{Store: bs, Prefix: blobstorage.RemotePrefix, Generation: blobstorage.RemoteGeneration(0)}
	}
	st, err := state.OpenCheckpoint(ctx, dir, work, opts)
	if err != nil {
		return nil, fmt.Errorf("open the state: %w", err)
	}
	return st, nil
}

// shownBytes is b as it is safe to print: a Go-quoted string when b is
// printable UTF-8, else 0x and its hex; cut after max bytes.
func shownBytes(b []byte, max int) string {
	cut := ""
	if max > 0 && len(b) > max {
		cut = fmt.Sprintf("…(%d bytes)", len(b))
		b = b[:max]
	}
	printable := utf8.Valid(b)
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != ' ' {
			printable = false
			break
		}
	}
	if printable {
		return strconv.Quote(string(b)) + cut
	}
	return fmt.Sprintf("0x%x", b) + cut
}

// ownerInfo is one owner of a snapshot.
type ownerInfo struct {
	Owner      string `json:"owner"`
	Tables     int    `json:"tables"`
	Bytes      int64  `json:"bytes"`
	Keys       uint64 `json:"keys_estimated"`
	KeyBytes   uint64 `json:"key_bytes"`
	ValueBytes uint64 `json:"value_bytes"`
	// Sampled is how many tables' properties the estimates come from.
	Sampled int `json:"tables_sampled"`
}

// shownKV is one key (and value) in a listing.
type shownKV struct {
	Owner     string `json:"owner"`
	Key       string `json:"key"`
	Value     string `json:"value,omitempty"`
	ValueSize int    `json:"value_size"`
}

// pickOwners returns the owners of st to show: all, or the one asked for.
func pickOwners(st *state.Store, owner string) ([]string, error) {
	all := st.Owners()
	if owner == "" {
		return all, nil
	}
	for _, o := range all {
		if o == owner {
			return []string{o}, nil
		}
	}
	return nil, fmt.Errorf("no owner %q in the state (it has %s)", owner, strings.Join(all, ", "))
}

func (a *app) inspectCmd() *cobra.Command {
	var owner, prefix string
	var limit, valueBytes int
	cmd := &cobra.Command{
		Use:   "inspect ID|LABEL",
		Short: "Look inside a checkpoint's or savepoint's state, without a job",
		Long: `inspect opens the state of a checkpoint (an id, latest or latest-completed) or a
savepoint read-only in a temporary directory and prints each owner's tables,
size and estimated key count (from the properties of at most 64 tables,
scaled by size), then the first
--limit keys (with --prefix, those that start with it) and their values, shown
safely: a quoted string when printable, else hex, cut after --value-bytes.

State in remote mode opens at once, a checkpoint's or a savepoint's: its tables
are read in place, block by block (a savepoint's from its archive, by range).
A checkpoint in local state is downloaded first; a savepoint of local state, or
a compressed one, is extracted first. inspect writes nothing to the store but a
checkpoint's restore pin, or a savepoint's lock.`,
		Example: `  tidemark inspect latest-completed
  tidemark inspect before-upgrade --owner counts --prefix user- --limit 50
  tidemark inspect ckpt-00000000000000000007 --output json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("ID|LABEL")(cmd, args); err != nil {
				return err
			}
			if limit < 0 || valueBytes < 0 {
				return usagef("--limit and --value-bytes must not be negative")
			}
			return checkName(args[0], true)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			snap, err := a.openSnapshot(ctx, bs, s, args[0])
			if err != nil {
				return err
			}
			defer snap.close()
			owners, err := pickOwners(snap.st, owner)
			if err != nil {
				return usagef("%v", err)
			}
			var infos []ownerInfo
			var kvs []shownKV
			more := false
			for _, id := range owners {
				o, err := snap.st.Owner(id)
				if err != nil {
					return err
				}
				stats, err := o.Stats()
				if err != nil {
					return err
				}
				infos = append(infos, ownerInfo{id, stats.Tables, stats.Bytes, stats.Keys, stats.KeyBytes, stats.ValueBytes, stats.Sampled})
				for kv, err := range o.Scan([]byte(prefix)) {
					if err != nil {
						return err
					}
					if len(kvs) >= limit {
						more = true
						break
					}
					kvs = append(kvs, shownKV{id, shownBytes(kv.Key, 0), shownBytes(kv.Value, valueBytes), len(kv.Value)})
				}
			}
			a.emit(map[string]any{"snapshot": snap, "owners": infos, "keys": kvs, "more": more}, func(w io.Writer) {
				printSnapshot(w, snap)
				fmt.Fprintf(w, "%-16s %7s %10s %14s\n", "owner", "tables", "size", "keys (est.)")
				for _, i := range infos {
					fmt.Fprintf(w, "%-16s %7d %10s %14d\n", i.Owner, i.Tables, humanBytes(i.Bytes), i.Keys)
				}
				what := "keys"
				if prefix != "" {
					what = fmt.Sprintf("keys with prefix %s", shownBytes([]byte(prefix), 0))
				}
				fmt.Fprintf(w, "\n%s (first %d):\n", what, limit)
				for _, kv := range kvs {
					fmt.Fprintf(w, "  %s  %s = %s\n", kv.Owner, kv.Key, kv.Value)
				}
				if more {
					fmt.Fprintf(w, "  … more (--limit shows more)\n")
				}
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "show only this owner")
	cmd.Flags().StringVar(&prefix, "prefix", "", "list only keys that start with this")
	cmd.Flags().IntVar(&limit, "limit", 20, "list at most this many keys")
	cmd.Flags().IntVar(&valueBytes, "value-bytes", 64, "show at most this many bytes of a value (0: all)")
	return cmd
}

func printSnapshot(w io.Writer, snap *snapshot) {
	how := "local (downloaded)"
	if snap.Remote {
		how = "remote (tables read in place)"
	}
	if snap.Kind == "savepoint" {
		if !snap.Remote {
			how = "extracted from the savepoint"
		}
		fmt.Fprintf(w, "savepoint   %s (checkpoint %s)\n", snap.Name, snap.Checkpoint)
	} else {
		fmt.Fprintf(w, "checkpoint  %s\n", snap.Checkpoint)
	}
	fmt.Fprintf(w, "state       %s\n\n", how)
}

// keyChange is one key that differs between two snapshots.
type keyChange struct {
	Owner  string `json:"owner"`
	Change string `json:"change"` // "added", "removed" or "changed"
	Key    string `json:"key"`
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
}

// ownerDiff counts what changed in one owner.
type ownerDiff struct {
	Owner   string `json:"owner"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Changed int    `json:"changed"`
	Only    string `json:"only_in,omitempty"` // "a" or "b": the owner exists in one only
}

func (a *app) diffCmd() *cobra.Command {
	var owner string
	var limit, valueBytes int
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Say which keys were added, removed or changed between two checkpoints or savepoints",
		Long: `diff opens two checkpoints or savepoints read-only (as inspect does) and compares
their state owner by owner, in key order: it counts the keys added in B, removed
from A and changed, and lists the first --limit of them. It reads both states
whole.`,
		Example: `  tidemark diff before-upgrade latest-completed
  tidemark diff ckpt-00000000000000000006 ckpt-00000000000000000007 --owner counts`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("A", "B")(cmd, args); err != nil {
				return err
			}
			if limit < 0 || valueBytes < 0 {
				return usagef("--limit and --value-bytes must not be negative")
			}
			if err := checkName(args[0], true); err != nil {
				return err
			}
			return checkName(args[1], true)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			bs, s, err := a.openReader(ctx)
			if err != nil {
				return err
			}
			sa, err := a.openSnapshot(ctx, bs, s, args[0])
			if err != nil {
				return err
			}
			defer sa.close()
			sb, err := a.openSnapshot(ctx, bs, s, args[1])
			if err != nil {
				return err
			}
			defer sb.close()
			owners := mergedOwners(sa.st.Owners(), sb.st.Owners())
			if owner != "" {
				if !containsString(owners, owner) {
					return usagef("no owner %q in either state", owner)
				}
				owners = []string{owner}
			}
			var diffs []ownerDiff
			var changes []keyChange
			for _, id := range owners {
				d, err := diffOwner(sa.st, sb.st, id, limit, valueBytes, &changes)
				if err != nil {
					return err
				}
				diffs = append(diffs, d)
			}
			a.emit(map[string]any{"a": sa, "b": sb, "owners": diffs, "changes": changes}, func(w io.Writer) {
				fmt.Fprintf(w, "a  %s %s (checkpoint %s)\nb  %s %s (checkpoint %s)\n\n", sa.Kind, sa.Name, sa.Checkpoint, sb.Kind, sb.Name, sb.Checkpoint)
				for _, d := range diffs {
					only := ""
					if d.Only != "" {
						only = " (only in " + d.Only + ")"
					}
					fmt.Fprintf(w, "%-16s +%d -%d ~%d%s\n", d.Owner, d.Added, d.Removed, d.Changed, only)
				}
				if len(changes) > 0 {
					fmt.Fprintf(w, "\n")
				}
				for _, c := range changes {
					switch c.Change {
					case "added":
						fmt.Fprintf(w, "  + %s  %s = %s\n", c.Owner, c.Key, c.New)
					case "removed":
						fmt.Fprintf(w, "  - %s  %s = %s\n", c.Owner, c.Key, c.Old)
					default:
						fmt.Fprintf(w, "  ~ %s  %s: %s → %s\n", c.Owner, c.Key, c.Old, c.New)
					}
				}
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "compare only this owner")
	cmd.Flags().IntVar(&limit, "limit", 20, "list at most this many changed keys")
	cmd.Flags().IntVar(&valueBytes, "value-bytes", 64, "show at most this many bytes of a value (0: all)")
	return cmd
}

func mergedOwners(a, b []string) []string {
	out := append([]string{}, a...)
	for _, o := range b {
		if !containsString(out, o) {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

func containsString(list []string, s string) bool { return slices.Contains(list, s) }

// diffOwner compares owner id of a and b in key order, appending up to
// limit changes (over all owners) to changes.
func diffOwner(a, b *state.Store, id string, limit, valueBytes int, changes *[]keyChange) (ownerDiff, error) {
	d := ownerDiff{Owner: id}
	inA, inB := containsString(a.Owners(), id), containsString(b.Owners(), id)
	switch {
	case !inA:
		d.Only = "b"
	case !inB:
		d.Only = "a"
	}
	next := func(st *state.Store, present bool) (func() (state.KV, bool, error), func(), error) {
		if !present {
			return func() (state.KV, bool, error) { return state.KV{}, false, nil }, func() {}, nil
		}
		o, err := st.Owner(id)
		if err != nil {
			return nil, nil, err
		}
		next, stop := iter.Pull2(o.Scan(nil))
		return func() (state.KV, bool, error) {
			kv, err, ok := next()
			return kv, ok, err
		}, stop, nil
	}
	na, stopA, err := next(a, inA)
	if err != nil {
		return d, err
	}
	defer stopA()
	nb, stopB, err := next(b, inB)
	if err != nil {
		return d, err
	}
	defer stopB()
	note := func(c keyChange) {
		if len(*changes) < limit {
			*changes = append(*changes, c)
		}
	}
	ka, okA, err := na()
	if err != nil {
		return d, err
	}
	kb, okB, err := nb()
	if err != nil {
		return d, err
	}
	for okA || okB {
		cmp := 0
		switch {
		case !okA:
			cmp = 1
		case !okB:
			cmp = -1
		default:
			cmp = strings.Compare(string(ka.Key), string(kb.Key))
		}
		switch {
		case cmp < 0:
			d.Removed++
			note(keyChange{id, "removed", shownBytes(ka.Key, 0), shownBytes(ka.Value, valueBytes), ""})
		case cmp > 0:
			d.Added++
			note(keyChange{id, "added", shownBytes(kb.Key, 0), "", shownBytes(kb.Value, valueBytes)})
		case string(ka.Value) != string(kb.Value):
			d.Changed++
			note(keyChange{id, "changed", shownBytes(ka.Key, 0), shownBytes(ka.Value, valueBytes), shownBytes(kb.Value, valueBytes)})
		}
		if cmp <= 0 {
			if ka, okA, err = na(); err != nil {
				return d, err
			}
		}
		if cmp >= 0 {
			if kb, okB, err = nb(); err != nil {
				return d, err
			}
		}
	}
	return d, nil
}
