//go:build race

package checkpoint

// raceEnabled tells tests whose work the race detector slows tenfold to
// do less of it (saying so).
const raceEnabled = true
