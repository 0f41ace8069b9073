package job

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// mergeOffsets merges the slots' Source offsets of a checkpoint into one
// document for a rescale: each must be a JSON object, merged key by key
// (recursively); the same key with different values in two slots is an
// error, since no Source could tell which is its own.
func mergeOffsets(bySlot map[string]json.RawMessage) (json.RawMessage, error) {
	var merged any = map[string]any{}
	for _, slot := range slices.Sorted(maps.Keys(bySlot)) {
		var doc any
		if err := json.Unmarshal(bySlot[slot], &doc); err != nil {
			return nil, fmt.Errorf("offsets of slot %s: %w", slot, err)
		}
		if _, ok := doc.(map[string]any); !ok {
			return nil, fmt.Errorf("offsets of slot %s are not a JSON object keyed by partition", slot)
		}
		var err error
		if merged, err = mergeValue(merged, doc, ""); err != nil {
			return nil, fmt.Errorf("offsets of slot %s: %w", slot, err)
		}
	}
	return json.Marshal(merged)
}

func mergeValue(a, b any, path string) (any, error) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return a, nil
		}
		return nil, fmt.Errorf("%q differs between slots (%v, %v)", path, a, b)
	}
	out := maps.Clone(am)
	for k, bv := range bm {
		if av, ok := out[k]; ok {
			v, err := mergeValue(av, bv, path+"/"+k)
			if err != nil {
				return nil, err
			}
			out[k] = v
		} else {
			out[k] = bv
		}
	}
	return out, nil
}

// uncovered returns a key path of old (a merged offsets document) that
// new lacks, or "": a partition no slot reads any more.
func uncovered(old, new json.RawMessage) string {
	var o, n any
	if json.Unmarshal(old, &o) != nil || json.Unmarshal(new, &n) != nil {
		return "(not JSON)"
	}
	return missingPath(o, n, "")
}

func missingPath(o, n any, path string) string {
	om, ok := o.(map[string]any)
	if !ok {
		return ""
	}
	nm, ok := n.(map[string]any)
	if !ok {
		return path
	}
	for _, k := range slices.Sorted(maps.Keys(om)) {
		nv, ok := nm[k]
		if !ok {
			return path + "/" + k
		}
		if p := missingPath(om[k], nv, path+"/"+k); p != "" {
			return p
		}
	}
	return ""
}

// leaves returns the key paths of a JSON document's scalar values.
func leaves(doc json.RawMessage) map[string]bool {
	var v any
	out := map[string]bool{}
	if json.Unmarshal(doc, &v) != nil {
		return out
	}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		m, ok := v.(map[string]any)
		if !ok {
			out[path] = true
			return
		}
		for k, sub := range m {
			walk(sub, path+"/"+k)
		}
	}
	walk(v, "")
	return out
}

// moved returns a key path that slot's offsets hold now, and another
// slot's held in the checkpoint resumed from, but not slot's own: a
// partition moved between slots without a rescale, which slot read
// again from its beginning ("" if none).
func moved(old map[string]json.RawMessage, slot string, now json.RawMessage) (path, from string) {
	own := leaves(old[slot])
	for p := range leaves(now) {
		if own[p] {
			continue
		}
		for _, other := range slices.Sorted(maps.Keys(old)) {
			if other != slot && leaves(old[other])[p] {
				return p, other
			}
		}
	}
	return "", ""
}
