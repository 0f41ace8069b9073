package job

import (
	"encoding/json"
	"testing"
)

func TestMergeOffsets(t *testing.T) {
	got, err := mergeOffsets(map[string]json.RawMessage{
		"a": json.RawMessage(`{"stream":"in","partitions":{"0":5,"2":7}}`),
		"b": json.RawMessage(`{"stream":"in","partitions":{"1":6}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"partitions":{"0":5,"1":6,"2":7},"stream":"in"}`; string(got) != want {
		t.Fatalf("merged %s, want %s", got, want)
	}
	for name, docs := range map[string]map[string]json.RawMessage{
		"numbers":  {"a": json.RawMessage(`5`), "b": json.RawMessage(`5`)},
		"conflict": {"a": json.RawMessage(`{"stream":"in"}`), "b": json.RawMessage(`{"stream":"other"}`)},
		"not JSON": {"a": json.RawMessage(`{`)},
	} {
		if _, err := mergeOffsets(docs); err == nil {
			t.Errorf("%s: merged", name)
		}
	}
	if p := uncovered(got, json.RawMessage(`{"partitions":{"0":9,"1":9},"stream":"in"}`)); p != "/partitions/2" {
		t.Errorf("uncovered: %q, want /partitions/2", p)
	}
	if p := uncovered(got, got); p != "" {
		t.Errorf("uncovered of itself: %q", p)
	}
	old := map[string]json.RawMessage{
		"a": json.RawMessage(`{"stream":"in","partitions":{"0":5}}`),
		"b": json.RawMessage(`{"stream":"in","partitions":{"1":6}}`),
	}
	if p, from := moved(old, "a", json.RawMessage(`{"stream":"in","partitions":{"0":8,"1":0,"7":0}}`)); p != "/partitions/1" || from != "b" {
		t.Errorf("moved: %q from %q, want /partitions/1 from b", p, from)
	}
	if p, _ := moved(old, "a", json.RawMessage(`{"stream":"in","partitions":{"0":8,"7":0}}`)); p != "" {
		t.Errorf("moved: %q for a new partition", p)
	}
	if p, _ := moved(map[string]json.RawMessage{"a": json.RawMessage(`3`), "b": json.RawMessage(`4`)}, "a", json.RawMessage(`9`)); p != "" {
		t.Errorf("moved: %q for numbers", p)
	}
}
