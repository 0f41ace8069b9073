package demo

import (
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// refuse checks the hello of a worker that connected: a missing or wrong
// token (WorkersConfig.Token), a slot out of range, or an invalid worker
// id is answered with a refusal saying why
// (the worker prints it), reported as a "refused" event and returned.
func (c *wcoord) refuse(a arrival) error {
	var err error
	s := a.hello.Slot
	if c.wc.Token != "" && subtle.ConstantTimeCompare([]byte(a.hello.Token), []byte(c.wc.Token)) != 1 {
		err = errors.New("worker token missing or wrong: start the worker with the coordinator's token")
	} else if s < 0 || s >= c.wc.Workers {
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
