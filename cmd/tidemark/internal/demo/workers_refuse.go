package demo

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tidemark-io/tidemark/blobstorage"
)

// admit answers the hello of a worker that connected, at once: it
// refuses it (refuse), keeps it as its slot's standby when the slot has
// a live worker (telling it so), or returns true: the worker is for a
// slot join waits for, or will.
func (c *wcoord) admit(a arrival) bool {
	if c.refuse(a) != nil {
		return false
	}
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	if c.over {
		_ = a.c.close()
		return false
	}
	if _, ok := c.live[a.hello.Slot]; !ok {
		return true
	}
	c.standbyLocked(a)
	return false
}

// standbyLocked keeps a, a worker for a slot that has a live worker, as
// the slot's standby: it tells it so (it waits for its first request,
// which comes if the live worker is lost) and reports a "standby" event.
// A previous standby of the slot is refused: the newest one wins (the
// previous one may be a worker restarted since). c.slotsMu is held.
func (c *wcoord) standbyLocked(a arrival) {
	s := a.hello.Slot
	if c.over {
		_ = a.c.close()
		return
	}
	if old, ok := c.pending[s]; ok {
		err := fmt.Errorf("a newer standby of slot %d connected (worker %s) and replaces this one", s, a.hello.Worker)
		_ = old.c.sendNow(wireRequest{Op: opRefuse, Reason: err.Error()})
		_ = old.c.close()
		c.event(WorkerEvent{Event: "refused", Slot: s, Worker: old.hello.Worker, Err: err, Missing: c.missingLocked()})
	}
	live := ""
	if w := c.live[s]; w != nil {
		live = w.id
	}
	msg := fmt.Sprintf("slot %d has a live worker (%s); waiting as its standby (it takes over if that worker is lost)", s, live)
	if err := a.c.sendNow(wireRequest{Op: opStandby, Reason: msg}); err != nil {
		_ = a.c.close()
		delete(c.pending, s)
		return
	}
	c.pending[s] = a
	c.event(WorkerEvent{Event: "standby", Slot: s, Worker: a.hello.Worker, Live: live})
}

// missingLocked returns the slots join waits for, sorted (nil: it does
// not wait). c.slotsMu is held.
func (c *wcoord) missingLocked() []int {
	if len(c.missing) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(c.missing))
}

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
	_ = a.c.sendNow(wireRequest{Op: opRefuse, Reason: err.Error()})
	_ = a.c.close()
	c.slotsMu.Lock()
	missing := c.missingLocked()
	c.slotsMu.Unlock()
	c.event(WorkerEvent{Event: "refused", Slot: s, Worker: a.hello.Worker, Err: err, Missing: missing})
	return err
}
