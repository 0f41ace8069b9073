package demo

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tidemark-io/tidemark/checkpoint"
	"github.com/tidemark-io/tidemark/state"
)

// Values of Config.RemoteState.
const (
	// RemoteStateOff keeps the state on local disk: a resume downloads
	// all of it before it opens.
	RemoteStateOff = ""
	// RemoteStateAll creates every SST in the store (state.RemoteAllLevels).
	RemoteStateAll = "all"
	// RemoteStateLower creates the SSTs of L5 and L6 in the store and the
	// others on local disk (state.RemoteLowerLevels).
	RemoteStateLower = "lower"
)

// ErrStateMode is returned (wrapped) when the job's checkpoint holds
// state in remote mode and the run is in local mode: its SSTs are in the
// store, and only remote mode can open them. The run refuses before it
// takes the writer role or changes anything.
var ErrStateMode = errors.New("demo: the checkpoint's state is in remote mode")

// ParseRemoteState checks a value of Config.RemoteState (or of the
// CLI's --remote-state) and returns its levels; remote is false for
// RemoteStateOff.
func ParseRemoteState(s string) (levels state.RemoteLevels, remote bool, err error) {
	switch s {
	case RemoteStateOff:
		return 0, false, nil
	case RemoteStateAll:
		return state.RemoteAllLevels, true, nil
	case RemoteStateLower:
		return state.RemoteLowerLevels, true, nil
	}
	return 0, false, fmt.Errorf("demo: remote state %q: want %q or %q (or empty: local state)", s, RemoteStateAll, RemoteStateLower)
}

// sameStateMode refuses to resume checkpoint cp, whose operator state
// says which mode wrote it, in a mode that cannot open it. Local state
// resumed in remote mode works: its tables stay local and new ones go to
// the store (a migration). State in remote mode, either level setting,
// opens in remote mode with either. Remote state resumed in local mode is
// refused: Pebble needs the store to read its tables.
// Workers follow the same rule (workersStateMode also reads their
// checkpoints, whose mode is in the record).
func (r *runner) sameStateMode(cp *checkpoint.CheckpointData, ops operatorState) error {
	_, remote, _ := ParseRemoteState(r.cfg.RemoteState)
	switch {
	case ops.RemoteState == RemoteStateOff:
		return nil
	case !remote:
		return fmt.Errorf("%w (%s levels in the store, written with --remote-state=%s): checkpoint %s cannot be opened in local mode; run again with --remote-state=%s",
			ErrStateMode, ops.RemoteState, ops.RemoteState, cp.ID, ops.RemoteState)
	}
	return nil
}

// runtimeOperatorKey is package job's entry in CheckpointData.Operators,
// which records its Config.RemoteState as remote_state: read to refuse a
// job in remote state with the CLI's words before the runtime starts.
const runtimeOperatorKey = "tidemark.job"

// checkStateMode reads the operator state of cp and checks its mode
// (sameStateMode).
func (r *runner) checkStateMode(cp *checkpoint.CheckpointData) error {
	var ops operatorState
	// The demo's own entry (RunWorkers), or the runtime's (Run): both
	// name the mode remote_state.
	for _, key := range []string{operatorKey, runtimeOperatorKey} {
		if raw, ok := cp.Operators[key]; ok {
			if err := json.Unmarshal(raw, &ops); err != nil {
				return fmt.Errorf("demo: checkpoint %s: operator state: %w", cp.ID, err)
			}
		}
	}
	return r.sameStateMode(cp, ops)
}
