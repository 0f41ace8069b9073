package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// Job identity.
//
// Every record a Storage saves carries the id of the job whose lineage it
// belongs to (CheckpointData.JobID), and so does every savepoint, whose
// manifest holds the record. A store's job is the job of its latest
// checkpoint (Storage.Load): a Save of a record without an id stamps that
// one, and the first Save into a store without a job (or holding only
// records from before ids existed) draws a new one with NewJobID. The
// job of a store therefore changes only with the pointer that names its
// latest record, atomically.
//
// Restoring a savepoint of another job onto a store that holds
// checkpoints is refused (ErrOtherJob) unless RestoreOptions.NewJob asks
// for a new job: the store then starts a new lineage under a new job id,
// after every checkpoint it holds (see ExtractCheckpointWith). Records
// and savepoints without an id (written before ids existed) belong to no
// job and are restorable anywhere.

// ErrOtherJob is returned (wrapped) when a savepoint or a record of one
// job would be restored or saved into a store holding the checkpoints of
// another: the two jobs' sources and outputs are unrelated, and mixing
// their lineages breaks exactly-once. Nothing is written.
var ErrOtherJob = errors.New("checkpoint: the checkpoint belongs to another job")

// JobStartKey is the key in CheckpointData.Source of the first checkpoint
// of a job started from another job's state (RestoreOptions.NewJob). Its
// value is that checkpoint's own JobID: the job's history, and its
// output, begin at this checkpoint.
const JobStartKey = "tidemark.job_start"

// maxJobIDLen bounds a job id.
const maxJobIDLen = 128

// NewJobID returns a new, random job id: "job-" and 32 hex digits.
func NewJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return "job-" + hex.EncodeToString(b[:])
}

// ValidateJobID reports whether id can name a job: 1 to 128 bytes of
// A-Z, a-z, 0-9, '.', '_' and '-'. NewJobID's ids are.
func ValidateJobID(id string) error {
	switch {
	case id == "":
		return errors.New("checkpoint: empty job id")
	case len(id) > maxJobIDLen:
		return fmt.Errorf("checkpoint: job id of %d bytes, over the %d-byte limit", len(id), maxJobIDLen)
	case strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != "":
		return fmt.Errorf("checkpoint: job id %q: only A-Z, a-z, 0-9, '.', '_' and '-' are allowed", id)
	}
	return nil
}

// StartsJob reports whether d is the first checkpoint of a job started
// from another job's state (see JobStartKey).
func (d *CheckpointData) StartsJob() bool {
	v, ok := d.Source[JobStartKey]
	return ok && d.JobID != "" && string(v) == d.JobID
}

// RestoreOptions configure a restore of a savepoint
// (RestoreSavepointWith, ExtractCheckpointWith, CheckJob).
type RestoreOptions struct {
	// NewJob starts a new job from the savepoint's state: a new job id,
	// and, on a store that holds checkpoints, a new lineage after them
	// whose first record says so (JobStartKey). Without it, a savepoint
	// of another job than the store's is refused with ErrOtherJob. A new
	// job reads again from the savepoint's offsets; the output its sink
	// committed before belongs to the old job, not to it.
	NewJob bool
}

// JobMismatch describes a refusal wrapping ErrOtherJob: the job of the
// checkpoint and the job of the store. Find it with errors.As.
type JobMismatch struct {
	// Checkpoint is the id of the checkpoint (the savepoint's) refused.
	Checkpoint string
	// Job is the job the checkpoint belongs to; Store the store's.
	Job, Store string
}

func (e *JobMismatch) Error() string {
	return fmt.Sprintf("%v: checkpoint %s is of job %s, the store holds the checkpoints of job %s", ErrOtherJob, e.Checkpoint, e.Job, e.Store)
}

// Unwrap returns ErrOtherJob.
func (e *JobMismatch) Unwrap() error { return ErrOtherJob }

// checkJob decides, on what it was given, whether rec may be restored
// into a store whose latest checkpoint is latest (nil: none).
func checkJob(rec, latest *CheckpointData, opts RestoreOptions) error {
	if opts.NewJob || latest == nil || rec.JobID == "" || latest.JobID == "" || rec.JobID == latest.JobID {
		return nil
	}
	return &JobMismatch{Checkpoint: rec.ID, Job: rec.JobID, Store: latest.JobID}
}

// CheckJob reports, reading only (dst.Load), whether rec — a savepoint's
// record (SavepointRecord) — may be restored into dst: nil unless rec
// belongs to another job than the checkpoints dst holds and opts does
// not ask for a new job, which is a *JobMismatch wrapping ErrOtherJob.
// A record or store without a job id (written before ids existed), and
// a store holding no checkpoint, accept any job.
//
// RestoreSavepointWith checks the same before it writes anything; call
// CheckJob first where the restore is preceded by changes of its own
// (taking the writer role of a blobstorage.Storage writes to the store).
func CheckJob(ctx context.Context, dst Storage, rec *CheckpointData, opts RestoreOptions) error {
	latest, err := dst.Load(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: check job: %w", err)
	}
	return checkJob(rec, latest, opts)
}

// JobToSave returns the job id a Storage saves d under, given the latest
// checkpoint it holds (nil: none): d's own, or, when d has none, the
// latest's, or a new one (NewJobID) when neither has. A d of another job
// than latest is refused with a *JobMismatch wrapping ErrOtherJob unless
// d starts a job (StartsJob) or one of the two has no id. Every Storage
// calls it in Save; d itself is not changed.
func JobToSave(d, latest *CheckpointData) (string, error) {
	switch {
	case d.JobID != "":
		if err := ValidateJobID(d.JobID); err != nil {
			return "", err
		}
		if latest != nil && latest.JobID != "" && latest.JobID != d.JobID && !d.StartsJob() {
			return "", &JobMismatch{Checkpoint: d.ID, Job: d.JobID, Store: latest.JobID}
		}
		return d.JobID, nil
	case latest != nil && latest.JobID != "":
		return latest.JobID, nil
	}
	return NewJobID(), nil
}

// withJob returns d with JobID job: d itself when it has it already, else
// a shallow copy (the caller's record is not changed).
func withJob(d *CheckpointData, job string) *CheckpointData {
	if d.JobID == job {
		return d
	}
	c := *d
	c.JobID = job
	return &c
}

// startJob makes cp the first checkpoint of a new job: a new job id,
// recorded under JobStartKey too.
func startJob(cp *CheckpointData) {
	cp.JobID = NewJobID()
	source := maps.Clone(cp.Source)
	if source == nil {
		source = map[string][]byte{}
	}
	source[JobStartKey] = []byte(cp.JobID)
	cp.Source = source
}
