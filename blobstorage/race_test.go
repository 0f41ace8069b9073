//go:build race

package blobstorage

// raceEnabled tells tests whose work the race detector slows tenfold to
// do less of it (saying so).
const raceEnabled = true
