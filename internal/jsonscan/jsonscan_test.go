package jsonscan

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestObjectYieldsWhatEncodingJSONDecodes(t *testing.T) {
	docs := []string{
		`{}`,
		` { "a" : 1 , "b":"x\"y}" ,"c":{"d":[1,{"e":"]"}]},"f":[ ],"g":null,"h":true, "i":-1.5e3 } `,
		`{"a":{"a":{"a":{"a":[[[[]]]]}}},"b":"\\\\"}`,
		`{"dup":1,"dup":2}`,
	}
	for _, doc := range docs {
		if !json.Valid([]byte(doc)) {
			t.Fatalf("test doc %s is not valid JSON", doc)
		}
		var keys, vals []string
		err := Object([]byte(doc), func(k, v []byte) error {
			keys, vals = append(keys, string(k)), append(vals, string(v))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		for i, v := range vals {
			if !json.Valid([]byte(v)) {
				t.Errorf("%s: member %q: value %q is not a whole JSON value", doc, keys[i], v)
			}
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		uniq := slices.Compact(slices.Sorted(slices.Values(keys)))
		if len(uniq) != len(m) {
			t.Errorf("%s: scanned keys %q, encoding/json decodes %d members", doc, keys, len(m))
		}
	}
}

func TestArrayYieldsEveryElement(t *testing.T) {
	var n int
	err := Array([]byte(` [ {"a":[1,2]}, "x,y", 3, [], null ] `), func(e []byte) error {
		if !json.Valid(e) {
			t.Errorf("element %q is not a whole JSON value", e)
		}
		n++
		return nil
	})
	if err != nil || n != 5 {
		t.Fatalf("Array: %d elements, %v; want 5", n, err)
	}
	if err := Array([]byte(`{}`), func([]byte) error { return nil }); err != ErrNotContainer {
		t.Fatalf("Array of an object: %v", err)
	}
}

func TestKeyIsMatchesLikeEncodingJSON(t *testing.T) {
	for key, want := range map[string]bool{
		`operators`: true, `OPERATORS`: true, `\u006fperators`: true, `operator\u017f`: true,
		"operator\u017f": true, `operator`: false, `operatorss`: false,
	} {
		if got := KeyIs([]byte(key), "operators"); got != want {
			t.Errorf("KeyIs(%q) = %v, want %v", key, got, want)
		}
		// What encoding/json does with the same key.
		var v struct {
			Operators int `json:"operators"`
		}
		_ = json.Unmarshal([]byte(`{"`+key+`":1}`), &v)
		if (v.Operators == 1) != want {
			t.Errorf("encoding/json matches %q: %v, test expects %v", key, v.Operators == 1, want)
		}
	}
}
