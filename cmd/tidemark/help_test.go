package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// No flag's usage string holds a back quote: pflag would take the quoted
// word as the flag's value name and print the usage without it.
func TestFlagUsagesHaveNoBackQuotes(t *testing.T) {
	a := &app{env: env{getenv: func(string) string { return "" }}}
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				n++
				if strings.Contains(f.Usage, "`") {
					t.Errorf("tidemark %s --%s: usage has a back quote: %q", c.CommandPath(), f.Name, f.Usage)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCmd())
	if n < 20 {
		t.Fatalf("visited %d flags: the walk missed commands", n)
	}
}

// The demo's help says what its --store defaults to (a store under
// --dir, not $TIDEMARK_STORE, which the demo ignores), and prints
// --worker-listen with its value and whole usage.
func TestDemoHelpSaysWhatItsStoreAndWorkerListenAre(t *testing.T) {
	out := must(t, "", "demo", "--help")
	for _, want := range []string{
		"--store string", "default file://<dir>/store; the demo ignores $TIDEMARK_STORE",
		"--worker-listen string", "tidemark demo worker --coordinator HOST:PORT --slot K",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo --help does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "(default $TIDEMARK_STORE)") {
		t.Errorf("demo --help says its store defaults to $TIDEMARK_STORE:\n%s", out)
	}
	// The other commands still default to the variable.
	if out := must(t, "", "ls", "--help"); !strings.Contains(out, "(default $TIDEMARK_STORE)") {
		t.Errorf("ls --help no longer says --store defaults to $TIDEMARK_STORE:\n%s", out)
	}
}
