package checkpoint

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestCompletedTreatsEmptyStatusAsCompleted(t *testing.T) {
	cases := map[Status]bool{"": true, StatusCompleted: true, StatusPrepared: false}
	for st, want := range cases {
		if got := (&CheckpointData{Status: st}).Completed(); got != want {
			t.Errorf("Completed() with status %q = %v, want %v", st, got, want)
		}
	}
}

func TestCheckpointDataJSONFieldNamesMatchReference(t *testing.T) {
	d := record(NewID(1), StatusPrepared)
	d.StateDirs = map[string]string{"w0": "w0"}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// The reference engine's fields, and job_id, which Tidemark adds
	// (omitted when empty; the reference decodes leniently and ignores it).
	want := []string{"id", "job_id", "operators", "source", "state_dirs", "status", "timestamp", "txn_id"}
	if !slices.Equal(keys, want) {
		t.Fatalf("JSON fields = %q, want %q", keys, want)
	}
}

func TestUnmarshalRecordIgnoresUnknownFields(t *testing.T) {
	d, err := DecodeRecord([]byte(`{"id":"ckpt-00000000000000000001","files":[{"path":"x"}],"status":"completed"}`))
	if err != nil {
		t.Fatalf("DecodeRecord: %v", err)
	}
	if d.ID != NewID(1) || !d.Completed() {
		t.Fatalf("got %+v", d)
	}
}

func TestUnmarshalRecordRejectsUnknownStatus(t *testing.T) {
	if _, err := DecodeRecord([]byte(`{"id":"a","status":"half-done"}`)); err == nil {
		t.Fatal("unknown status accepted")
	}
}

func TestOffsetsReadsTheCoordinatorKey(t *testing.T) {
	d := &CheckpointData{Source: map[string][]byte{SourceOffsetsKey: []byte("42")}}
	if string(d.Offsets()) != "42" {
		t.Fatalf("Offsets() = %q", d.Offsets())
	}
}

// A record whose id no NextID can follow (it sorts above every id NewID
// makes, or is the last one) would stop every later checkpoint from
// becoming the latest: it is refused when read and when saved.
func TestRecordsWhoseIDNoCheckpointCanFollowAreRefused(t *testing.T) {
	for _, id := range []string{"zzz", "ckpt-99999999999999999999x", NewID(^uint64(0)), "ckpt-1"} {
		b := []byte(`{"id":"` + id + `","status":"completed"}`)
		if _, err := DecodeRecord(b); err == nil {
			t.Errorf("DecodeRecord accepted id %q", id)
		}
		if err := NewFileStorage(t.TempDir()).Save(t.Context(), &CheckpointData{ID: id, Status: StatusCompleted}); err == nil {
			t.Errorf("Save accepted id %q", id)
		}
	}
	if _, err := DecodeRecord([]byte(`{"id":"` + NewID(7) + `","status":"completed"}`)); err != nil {
		t.Fatalf("DecodeRecord of a NewID id: %v", err)
	}
}
