package archive

import "testing"

// Remote objects of state in remote mode are carried under remote/<owner>/.
func TestValidatePathRemote(t *testing.T) {
	for p, ok := range map[string]bool{
		"remote/op/e1-ab/000012.sst": true,
		"remote/op/x":                true,
		"remote/op":                  false, // no owner segment and file
		"remote/":                    false,
		"remotex/op/x":               false,
		"remote/op/../x":             false,
		"other/op/x":                 false,
	} {
		if err := ValidatePath(p); (err == nil) != ok {
			t.Errorf("ValidatePath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}
