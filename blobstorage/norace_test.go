//go:build !race

package blobstorage

// raceEnabled: see race_test.go.
const raceEnabled = false
