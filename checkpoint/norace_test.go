//go:build !race

package checkpoint

// raceEnabled: see race_test.go.
const raceEnabled = false
