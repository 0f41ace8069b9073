package demo

import (
	"fmt"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// refuse checks the hello of a worker that connected: a slot out of
// range, or an invalid worker id, is answered with a refusal saying why
// (the worker prints it), reported as a "refused" event and returned.
func (c *wcoord) refuse(a arrival) error {
	var err error
	s := a.hello.Slot
	if s < 0 || s >= c.wc.Workers {
		err = fmt.Errorf("slot %d out of range: this job has slots 0..%d", s, c.wc.Workers-1)
	} else if verr := blobstorage.ValidateWorkerID(a.hello.Worker); verr != nil {
		err = fmt.Errorf("worker id %q of slot %d: %w", a.hello.Worker, s, verr)
	}
	if err == nil {
		return nil
	}
	_ = a.c.send(wireRequest{Op: opRefuse, Reason: err.Error()})
	_ = a.c.close()
	c.event(WorkerEvent{Event: "refused", Slot: s, Worker: a.hello.Worker, Err: err})
	return err
}
