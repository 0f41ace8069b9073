package natstest_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tidemark-io/tidemark/integration/natstest"
)

// TestPinsAgree checks that the install script, go.mod and NATSVersion
// name the same nats-server version.
func TestPinsAgree(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-nats-server.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`NATS_SERVER_VERSION:-(v[0-9.]+)`).FindSubmatch(script)
	if m == nil || string(m[1]) != natstest.NATSVersion {
		t.Errorf("install-nats-server.sh pins %q, natstest.NATSVersion is %s", m, natstest.NATSVersion)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`github.com/nats-io/nats-server/v2 ` + regexp.QuoteMeta(natstest.NATSVersion) + `\b`).Match(mod) {
		t.Errorf("go.mod does not require nats-server %s", natstest.NATSVersion)
	}
}

// exercise checks what every mode must give: credentials required,
// JetStream on, and a stream that survives Kill and Restart.
func exercise(t *testing.T, srv *natstest.Server) {
	t.Helper()
	if _, err := nats.Connect(srv.URL, nats.NoReconnect(), nats.Timeout(5*time.Second)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without credentials: err %v, want %v", err, nats.ErrAuthorization)
	}
	if _, err := nats.Connect(srv.URL, nats.UserInfo(srv.User, "wrong"), nats.NoReconnect(), nats.Timeout(5*time.Second)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect with a wrong password: err %v, want %v", err, nats.ErrAuthorization)
	}
	js := srv.JetStream(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "probe", Subjects: []string{"probe.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, "probe.a", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill(t)
	srv.Restart(t)
	js = srv.JetStream(t)
	st, err = js.Stream(ctx, st.CachedInfo().Config.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("after kill and restart the stream holds %d messages, want 3", n)
	}
}

func TestProcessServer(t *testing.T) {
	srv := natstest.StartProcess(t)
	pid := srv.PID()
	if pid == 0 {
		t.Fatal("no PID for a process server")
	}
	exercise(t, srv)
	if srv.PID() == pid {
		t.Fatalf("restart kept PID %d: the process was not killed", pid)
	}
}

func TestEmbeddedServer(t *testing.T) {
	exercise(t, natstest.StartEmbedded(t))
}

func TestDockerServer(t *testing.T) {
	if err := natstest.DockerAvailable(t.Context()); err != nil {
		t.Skipf("SKIPPED LOUDLY: no Docker daemon answers (%v); the FROM scratch nats-server image is NOT tested here", err)
	}
	srv := natstest.StartDocker(t)
	if srv.ContainerID() == "" {
		t.Fatal("no container id for a docker server")
	}
	exercise(t, srv)
}
