//go:build !race

package archive

// raceEnabled: see race_test.go.
const raceEnabled = false
