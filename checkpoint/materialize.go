package checkpoint

import "context"

// Materialize makes the state directories of checkpoint d present under
// s.StateDir(d.ID): for a Storage whose state lives in an object store
// (a Restorer) it calls its Restore (a download on a node that
// does not have them, nothing if they are there already); for a
// FileStorage, whose state is local, it does nothing. A nil d is a no-op.
// Call it after choosing the checkpoint to resume from and before opening
// native state.
func Materialize(ctx context.Context, s Storage, d *CheckpointData) error {
	if d == nil {
		return nil
	}
	if r, ok := s.(Restorer); ok {
		return r.Restore(ctx, d.ID)
	}
	return nil
}
