package job

import (
	"context"
	"encoding/json"
)

// Group is how the coordinator and the workers of a job spanning hosts
// reach each other (RunCoordinator, RunWorker). Records never pass
// through it: each worker reads its own part of the input, writes its
// own sink transactions and saves its own part of the state to the
// store; the Group carries only the plan (who runs which slot, from which
// checkpoint, and the barriers) and the workers' reports.
// connector/jetstream implements it over a NATS JetStream key-value
// bucket. Its methods are safe for concurrent use; the channels they
// return are closed when ctx is done (or the Group fails).
type Group interface {
	// Lead makes the caller the job's coordinator at epoch (its writer
	// epoch on the Storage), with compare-and-set: it fails with an error
	// wrapping checkpoint.ErrFenced if a coordinator of a greater epoch
	// leads. A Lead of a greater epoch fences every earlier coordinator:
	// their Announce fails from then on.
	Lead(ctx context.Context, epoch uint64) error
	// Announce replaces the plan every worker follows, with
	// compare-and-set against the plan this coordinator last wrote: it
	// fails, wrapping checkpoint.ErrFenced, once another coordinator led.
	Announce(ctx context.Context, p Plan) error
	// Members delivers, at once and then on every change, which worker
	// (an incarnation id, blobstorage.NewWorkerID) holds each slot.
	Members(ctx context.Context) (<-chan map[string]string, error)
	// Reports delivers the reports workers send from now on; it may
	// deliver older ones too (the coordinator tells a report of another
	// barrier, generation or incarnation by its fields).
	Reports(ctx context.Context) (<-chan Report, error)

	// Join makes worker the holder of slot (a later Join of the slot by
	// another incarnation replaces it) and delivers the current plan,
	// then every plan announced after it.
	Join(ctx context.Context, slot, worker string) (<-chan Plan, error)
	// Report sends a worker's report to the coordinator.
	Report(ctx context.Context, r Report) error
}

// Plan is what the coordinator asks of every worker. A new (Epoch, Gen)
// restarts every worker from Restore: it drops its open transaction and
// its state, restores its owners of Restore from the store and seeks its
// Source to its slot's Offsets. Within a generation, Barrier names the
// checkpoint each worker cuts next.
type Plan struct {
	// Epoch is the coordinator's writer epoch, Gen the generation within
	// it: every membership change or failed barrier starts a new one.
	Epoch uint64 `json:"epoch"`
	Gen   uint64 `json:"gen"`
	// Members maps each slot to the worker incarnation that runs it in
	// this generation. A worker not named waits; one whose slot names
	// another incarnation after it was named has been replaced and stops.
	Members map[string]string `json:"members"`
	// Restore is the checkpoint every worker resumes from ("": from the
	// beginning, empty state). Owners are, per slot, the state owners of
	// Restore that slot restores, and Offsets its Source offsets.
	Restore string                     `json:"restore,omitempty"`
	Owners  map[string][]string        `json:"owners,omitempty"`
	Offsets map[string]json.RawMessage `json:"offsets,omitempty"`
	// Rescale says Restore was taken by other slots: Owners are then
	// those of Restore's slots, and each worker restores instead the
	// owners of Restore it declares (WorkerConfig.Owners); each slot's
	// Offsets are every old slot's offsets merged.
	Rescale bool `json:"rescale,omitempty"`
	// Next is the id of the first checkpoint of the generation: the
	// transaction each worker opens. Barrier, when not empty, is the
	// checkpoint to cut now (Next, then each NextID in turn).
	Next    string `json:"next"`
	Barrier string `json:"barrier,omitempty"`
	// Stop ends the job: its last checkpoint completed with every
	// Source at its end. Workers return.
	Stop bool `json:"stop,omitempty"`
}

// Report is a worker's answer to a barrier: its part of the checkpoint
// is saved (blobstorage.Worker.SavePart) and its sink transaction
// prepared.
type Report struct {
	Epoch      uint64 `json:"epoch"`
	Gen        uint64 `json:"gen"`
	Slot       string `json:"slot"`
	Worker     string `json:"worker"`
	Checkpoint string `json:"checkpoint"`
	// Offsets are the slot's Source offsets at the barrier, Owners the
	// state owners its part holds, Writer its sink transaction's
	// Txn.Writer.
	Offsets json.RawMessage `json:"offsets,omitempty"`
	Owners  []string        `json:"owners"`
	Writer  string          `json:"writer"`
	// EOF says the slot's Source ended (io.EOF) before the barrier.
	EOF bool `json:"eof,omitempty"`
}
