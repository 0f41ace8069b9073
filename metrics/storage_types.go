package metrics

import "time"

// Mirror of blobstorage.Observer until it lands: the lead adds these types
// to package blobstorage with exactly these names, and this file is then
// deleted in favour of them.

// StorageObserver receives what a Storage does, for metrics. Its methods
// are called synchronously and must be quick.
type StorageObserver interface {
	Saved(SaveStats)
	Restored(RestoreStats)
	Collected(GCStats)
	Fenced(epoch uint64)
}

// SaveStats describes one checkpoint save.
type SaveStats struct {
	ID            string
	Completed     bool
	Duration      time.Duration
	UploadedFiles int
	UploadedBytes int64
	ReusedFiles   int
	ReusedBytes   int64
	Requests      int
	Err           error
}

// RestoreStats describes one restore.
type RestoreStats struct {
	ID       string
	Duration time.Duration
	Files    int
	Bytes    int64
	Err      error
}

// GCStats describes one garbage collection.
type GCStats struct {
	Deleted        int
	DeletedBytes   int64
	AbortedUploads int
	ExpiredPins    int
	Duration       time.Duration
	Err            error
}
