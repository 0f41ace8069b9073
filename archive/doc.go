// Package archive reads and writes Tidemark's portable, checksummed archive
// format: the self-contained form of a checkpoint that savepoints are made
// of, that can be copied between buckets and regions and extracted anywhere.
//
// # Format
//
// An archive is a tar stream (POSIX ustar, with PAX records where a path
// needs them). Its first entry is MANIFEST.json, a [Manifest]: the format
// version ([FormatVersion]), the checkpoint record as opaque JSON, and for
// every file its path, size and SHA-256. The files follow, one regular tar
// entry each, in manifest order, and nothing else: no directory, link or
// device entries. File paths are relative and '/'-separated, live under
// state/<owner>/ (see [StatePrefix]) or, for the objects of state in
// remote mode, remote/<owner>/ ([RemotePrefix]) and obey [blobstore.ValidateKey], so an
// archive path can always be used as an object key and never names anything
// outside the directory it is extracted into.
//
// The whole stream may be zstd-compressed, as one zstd frame whose window
// is at most 8 MiB (what Write and the zstd command line up to level 19
// produce). Readers detect compression by the zstd magic bytes
// (28 B5 2F FD) and read plain tar otherwise, so callers never say which
// one they have; other compressed formats (gzip, bzip2, xz, lz4, zip, …)
// are refused with an error that names them.
//
// The archive is exactly that: the tar entries, the end-of-archive marker
// (two zero blocks), zero padding of any length (tar pads to its record
// size, which the writer chooses), and for zstd the end of the frame, then the end of the input. MANIFEST.json
// is strict JSON and valid UTF-8: "version" first, then "record" and
// "files", each once, and nothing else.
//
// The record is opaque here: this package checks only that it is valid
// JSON within the manifest's size. Package checkpoint decodes it, under
// its record limits (checkpoint.MaxOwners and the others), before any
// file is extracted.
//
// # Streaming
//
// [Write], [Read], [Verify] and [ExtractDir] each make one pass over the
// data: digests are computed while the bytes are copied, never in a second
// pass, and no file or archive is buffered whole in memory or on disk.
// Even the manifest is decoded as it streams. Memory is bounded by the
// manifest's size (see [Limits] for the figures), a few copy buffers and,
// for compressed archives, the zstd window (at most 8 MiB); nothing is
// ever allocated from a size the archive declares. Work is bounded by the
// input: a plain tar yields exactly its bytes, and a compressed one at
// most [Limits].MaxExpansion times its size plus [ExpansionAllowance].
//
// [NewReader] reads and checks the manifest alone, so that a caller can
// examine it and refuse before any file is read or anything is created;
// [Reader.ReadFiles] or [Reader.Extract] then reads the rest.
//
// # Safety
//
// An archive is untrusted input. Reading refuses, before or while it
// streams, everything that does not match the manifest exactly: a missing
// or late manifest, an unknown version, bad paths (absolute, "..", ".",
// empty segments, backslashes, control characters, outside state/ and remote/),
// non-regular entries (directories, symlinks, hard links, devices, FIFOs),
// sparse files of every format and any entry whose bytes the stream does
// not carry, duplicates, files the manifest does not list or that come
// out of manifest order, listed files that never come, size and digest
// mismatches, totals over [Limits], and anything after the end of the
// archive. A digest mismatch is reported to the consumer of a file in
// place of its io.EOF, so nothing unverified is ever accepted as
// complete. [ExtractDir] and [ExtractRoot] additionally work through
// directory handles (os.Root) and write into a staging directory that is
// renamed into place only once every file has been verified and synced,
// so a refused archive leaves the destination as it was and swapping a
// directory for a symbolic link mid-extraction cannot send a byte outside
// it (see [Reader.Extract]).
//
// # Errors
//
// Every refusal of archive content wraps [ErrCorrupt] and names the entry
// concerned; refusals because of [Limits] also wrap [ErrTooLarge], and bad
// paths also wrap [blobstore.ErrInvalidKey]. Errors of the underlying
// reader or writer and context cancellation are returned wrapped but are
// not ErrCorrupt: a dropped connection is not a damaged archive.
package archive
