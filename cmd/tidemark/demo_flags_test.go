package main

import (
	"os"
	"strings"
	"testing"
)

// Negative --concurrency, --slow and --outage-tolerance are usage errors
// (exit 2), refused before anything is written, as --records 0 is.
func TestDemoRefusesNegativeFlags(t *testing.T) {
	for _, extra := range [][]string{
		{"--records", "0"},
		{"--concurrency", "-1"},
		{"--slow", "-1s"},
		{"--outage-tolerance", "-5s"},
	} {
		dir, storeDir := t.TempDir(), t.TempDir()
		_, errOut, code := tm(t, "", append([]string{"demo", "--dir", dir, "--store", fileURL(storeDir)}, extra...)...)
		if code != exitUsage {
			t.Errorf("demo %v: exit %d, want %d\n%s", extra, code, exitUsage, errOut)
		}
		for _, d := range []string{dir, storeDir} {
			if entries, _ := os.ReadDir(d); len(entries) != 0 {
				t.Errorf("demo %v wrote into %s: %v", extra, d, entries)
			}
		}
	}
}

// --concurrency 0 means the default, as its help says: the demo runs.
func TestDemoConcurrencyZeroIsTheDefault(t *testing.T) {
	_, errOut, code := tm(t, "", demoArgs(t.TempDir(), fileURL(t.TempDir()), "--concurrency", "0")...)
	if code != 0 {
		t.Fatalf("demo --concurrency 0: exit %d\n%s", code, errOut)
	}
}

// A flag value the demo cannot use is a usage error naming the flag,
// refused before anything starts or is written: an empty --dir, a listen
// address without a port or with one past 65535, a crash past the end of
// the source.
func TestDemoRefusesFlagValuesItCannotUse(t *testing.T) {
	for _, c := range []struct {
		flag  string
		extra []string
	}{
		{"--dir", []string{"--dir", ""}},
		{"--metrics-addr", []string{"--metrics-addr", "nonsense"}},
		{"--metrics-addr", []string{"--metrics-addr", "127.0.0.1:99999"}},
		{"--worker-listen", []string{"--workers", "2", "--worker-listen", "nonsense"}},
		{"--worker-listen", []string{"--workers", "2", "--worker-listen", ":70000"}},
		{"--crash-after-records", []string{"--records", "100", "--crash-after-records", "101"}},
	} {
		dir, storeDir := t.TempDir(), t.TempDir()
		_, errOut, code := tm(t, "", append([]string{"demo", "--dir", dir, "--store", fileURL(storeDir)}, c.extra...)...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) {
			t.Errorf("demo %v: exit %d, want %d naming %s\n%s", c.extra, code, exitUsage, c.flag, errOut)
		}
		for _, d := range []string{dir, storeDir} {
			if entries, _ := os.ReadDir(d); len(entries) != 0 {
				t.Errorf("demo %v wrote into %s: %v", c.extra, d, entries)
			}
		}
	}
}

// A usage error names the one flag that is wrong, not every flag its
// check shares.
func TestAUsageErrorNamesOnlyTheWrongFlag(t *testing.T) {
	store := ranDemo(t)
	for _, c := range []struct {
		args       []string
		flag, more string
	}{
		{[]string{"gc", "--grace", "0"}, "--grace", "--keep"},
		{[]string{"gc", "--keep", "0"}, "--keep", "--grace"},
		{demoArgs(t.TempDir(), fileURL(t.TempDir()), "--words", "0"), "--words", "--records"},
		{demoArgs(t.TempDir(), fileURL(t.TempDir()), "--slow", "-1s"), "--slow", "--concurrency"},
	} {
		_, errOut, code := tm(t, store, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.flag) || strings.Contains(errOut, c.more) {
			t.Errorf("%v: exit %d, want %d naming %s and not %s\n%s", c.args, code, exitUsage, c.flag, c.more, errOut)
		}
	}
}
