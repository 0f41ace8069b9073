package main

import (
	"os"
	"strings"
	"testing"

	"github.com/tidemark-io/tidemark/integration/natstest"
)

// sourceEnv is the environment of a demo against srv: its credentials.
func sourceEnv(srv *natstest.Server) map[string]string {
	return map[string]string{natsUserEnv: srv.User, natsPasswordEnv: srv.Password}
}

// The input is produced once (a rerun adds nothing), the job crashes
// mid-stream and resumes on an empty dir, and the output stream holds
// every input's count exactly once.
func TestDemoSourceCrashesAndResumesExactlyOnceOverJetStream(t *testing.T) {
	srv := natstest.StartProcess(t)
	vars := sourceEnv(srv)
	source := srv.URL + "/words"
	produce := []string{"demo", "produce", "--source", source, "--records", "20000", "--words", "300"}
	if out, errOut, code := tmEnv(t, vars, produce...); code != 0 || !strings.Contains(out, "produced 20000 records") {
		t.Fatalf("produce: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := tmEnv(t, vars, produce...); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("produce again: exit %d, want nothing to do\n%s%s", code, out, errOut)
	}
	store := fileURL(t.TempDir())
	args := demoArgs(t.TempDir(), store, "--source", source, "--crash-after-records", "10000")
	if out, errOut, code := tmEnv(t, vars, args...); code != exitCrashed {
		t.Fatalf("crashing demo: exit %d, want %d\n%s%s", code, exitCrashed, out, errOut)
	}
	args = demoArgs(t.TempDir(), store, "--source", source, "--crash-after-records", "10000")
	out, errOut, code := tmEnv(t, vars, args...)
	if code != 0 || !strings.Contains(out, "exactly-once: OK, 20000 records, 300 words") || !strings.Contains(errOut, "resumed from checkpoint") {
		t.Fatalf("resumed demo: exit %d, want exactly-once: OK after a resume\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// A rerun of the finished job reads nothing and checks again.
	if out, errOut, code := tmEnv(t, vars, args...); code != 0 || !strings.Contains(out, "exactly-once: OK, 20000 records") {
		t.Fatalf("rerun: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	// A new store has no claim on the output stream of the old one.
	args = demoArgs(t.TempDir(), fileURL(t.TempDir()), "--source", source)
	if out, errOut, code := tmEnv(t, vars, args...); code != exitError || !strings.Contains(errOut, "holds another job's output") {
		t.Fatalf("new store over a used output stream: exit %d, want %d and a refusal\nstdout: %s\nstderr: %s", code, exitError, out, errOut)
	}
}

// A missing stream, a bad URL, --workers and a server that refuses the
// credentials are refused before the demo creates its dir or store.
func TestDemoSourceRefusesBeforeAnythingChanges(t *testing.T) {
	srv := natstest.StartProcess(t)
	for _, c := range []struct {
		name   string
		vars   map[string]string
		source string
		extra  []string
		code   int
		want   string
	}{
		{"missing stream", sourceEnv(srv), srv.URL + "/absent", nil, exitError, "stream absent not found; fill it first: tidemark demo produce"},
		{"no stream in the URL", sourceEnv(srv), srv.URL, nil, exitUsage, "want nats://HOST:PORT/STREAM"},
		{"not nats", sourceEnv(srv), "http://127.0.0.1:1/words", nil, exitUsage, "want nats://HOST:PORT/STREAM"},
		{"with workers", sourceEnv(srv), srv.URL + "/words", []string{"--workers", "2"}, exitUsage, "leave out --workers"},
		{"wrong password", map[string]string{natsPasswordEnv: "wrong"}, srv.URL + "/words", nil, exitError, "connect to NATS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir() + "/node"
			store := t.TempDir() + "/store"
			args := demoArgs(dir, fileURL(store), append([]string{"--source", c.source}, c.extra...)...)
			_, errOut, code := tmEnv(t, c.vars, args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, want %d and %q:\n%s", code, c.code, c.want, errOut)
			}
			for _, p := range []string{dir, store} {
				if exists(p) {
					t.Fatalf("%s was created by a refused run", p)
				}
			}
		})
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
