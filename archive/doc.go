// Package archive reads and writes Tidemark's portable, checksummed archive
// format: the self-contained form of a checkpoint that savepoints are made
// of, that can be copied between buckets and regions and extracted anywhere.
//
// # Format
//
// An archive is a tar stream (POSIX ustar, with PAX records where a path
// needs them), optionally zstd-compressed as one frame (readers detect it
// by its magic bytes). Its first entry is MANIFEST.json, a [Manifest]: the
// format version ([FormatVersion]), the checkpoint record as opaque JSON,
// and every file's path, size and SHA-256. The files follow, one regular
// entry each, in manifest order, under state/<owner>/ ([StatePrefix]) or
// remote/<owner>/ ([RemotePrefix]), and nothing else. Every path is a
// valid object key and never names anything outside the directory it is
// extracted into.
//
// # Streaming
//
// [Write], [Read], [Verify] and [ExtractDir] each make one pass over the
// data, hashing while they copy; nothing is buffered whole. Memory is
// bounded by the manifest's size ([Limits]), a few copy buffers and the
// zstd window, never by a size the archive declares. [NewReader] reads
// and checks the manifest alone, so a caller can refuse before any file
// is read; [Reader.ReadFiles] or [Reader.Extract] then reads the rest.
//
// # Safety
//
// An archive is untrusted input. Reading refuses everything that does not
// match the manifest exactly: bad paths, non-regular and sparse entries,
// duplicates, unlisted or missing files, size and digest mismatches,
// totals over [Limits], and bytes after the end. A digest mismatch takes
// the place of a file's io.EOF, so nothing unverified is accepted as
// complete. [ExtractDir] and [ExtractRoot] work through directory handles
// (os.Root) in a staging directory renamed into place only once every
// file is verified and synced: a refused archive changes nothing.
//
// The exact format, the bounds on memory and work, and the full list of
// what is refused are in docs/savepoints.md ("The archive format").
//
// # Errors
//
// Every refusal of archive content wraps [ErrCorrupt] and names the entry
// concerned; refusals because of [Limits] also wrap [ErrTooLarge], and bad
// paths also wrap [blobstore.ErrInvalidKey]. Errors of the underlying
// reader or writer and context cancellation are returned wrapped but are
// not ErrCorrupt: a dropped connection is not a damaged archive.
package archive
