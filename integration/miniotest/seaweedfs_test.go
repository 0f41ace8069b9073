package miniotest

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestSeaweedFSServesConditionalWrites starts SeaweedFS in every mode
// this machine can run and checks the basics the other packages'
// SeaweedFS tests build on: a bucket, a put and a get, If-None-Match
// enforced, and the data kept across a restart on the same endpoint.
func TestSeaweedFSServesConditionalWrites(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode string) {
		begin := time.Now()
		t.Setenv(EnvMode, mode)
		s := StartSeaweedFS(t)
		t.Logf("%s start took %v (%s at %s)", mode, time.Since(begin).Round(time.Millisecond), s.b.id(), s.Endpoint)
		if s.Kind() != "seaweedfs" || s.Mode() != mode {
			t.Fatalf("Kind, Mode = %q, %q", s.Kind(), s.Mode())
		}
		bucket := s.NewBucket(t)
		put(t, s, bucket, "k", []byte("v"))
		_, err := s.S3Client(t).PutObject(t.Context(), &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("w"), IfNoneMatch: aws.String("*"),
		})
		if err == nil {
			t.Fatal("SeaweedFS let If-None-Match: * overwrite an existing object")
		}
		if b := get(t, s, bucket, "k"); string(b) != "v" {
			t.Fatalf("got %q, want %q", b, "v")
		}
		endpoint := s.Endpoint
		begin = time.Now()
		s.Restart(t)
		t.Logf("restart took %v", time.Since(begin).Round(time.Millisecond))
		if s.Endpoint != endpoint {
			t.Fatalf("endpoint moved from %s to %s", endpoint, s.Endpoint)
		}
		if b := get(t, s, bucket, "k"); string(b) != "v" {
			t.Fatalf("after restart got %q, want %q", b, "v")
		}
	})
}

func TestInstallScriptPinsSeaweedFSVersion(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-seaweedfs.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PINNED_VERSION="([^"]+)"$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/install-seaweedfs.sh has no PINNED_VERSION line")
	}
	if string(m[1]) != SeaweedFSVersion {
		t.Fatalf("scripts/install-seaweedfs.sh pins %s, SeaweedFSVersion is %s", m[1], SeaweedFSVersion)
	}
}

func TestMissingSeaweedFSErrorSaysHowToInstall(t *testing.T) {
	t.Setenv(EnvCache, t.TempDir())
	t.Setenv(envSeaweedBin, "")
	_, err := seaweedBinary()
	if err == nil || !strings.Contains(err.Error(), "scripts/install-seaweedfs.sh") {
		t.Fatalf("seaweedBinary with an empty cache = %v, want an error naming scripts/install-seaweedfs.sh", err)
	}
}

func TestSeaweedFSSocketsAreTheGRPCPorts(t *testing.T) {
	var ports [7]int
	for i := range ports {
		ports[i] = 40000 + i
	}
	got := seaweedSockets(seaweedArgs("127.0.0.1", "127.0.0.1", "/d", "/c", 39999, ports, SeaweedFSOptions{}))
	want := []string{
		"/tmp/seaweedfs-master-grpc-40000.sock", "/tmp/seaweedfs-volume-grpc-40001.sock",
		"/tmp/seaweedfs-filer-grpc-40002.sock", "/tmp/seaweedfs-s3-grpc-40003.sock",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sockets %q, want %q", got, want)
	}
}
