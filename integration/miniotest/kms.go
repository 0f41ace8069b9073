package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"testing"
	"time"
)

// KMSKeyName is the name of the key of the built-in KMS that StartWithKMS
// configures: what SSE-KMS requests name as their key id.
const KMSKeyName = "tidemark-test-key"

// StartWithKMS starts a MinIO server for this test alone, like Start, with
// MinIO's built-in KMS holding one key, KMSKeyName
// (MINIO_KMS_SECRET_KEY=name:base64key, a random 256-bit key), so that it
// serves SSE-S3 (AES256) and SSE-KMS. TIDEMARK_MINIO_ENDPOINT does not
// apply: the external server may have no KMS.
func StartWithKMS(t testing.TB) *Server {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go ≥ 1.24)
	env := "MINIO_KMS_SECRET_KEY=" + KMSKeyName + ":" + base64.StdEncoding.EncodeToString(key)
	k := *minioKind
	k.processEnv = append(slices.Clip(k.processEnv), env)
	k.containerEnv = maps.Clone(k.containerEnv)
	k.containerEnv["MINIO_KMS_SECRET_KEY"] = env[len("MINIO_KMS_SECRET_KEY="):]
	mode, err := chooseMode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var s *Server
	if mode == ModeDocker {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		s, err = startDocker(ctx, dockerOptions{kind: &k})
	} else {
		s, err = startProcess(t.Context(), &k, t.TempDir())
	}
	if err != nil {
		t.Fatal(err)
	}
	registerCleanup(t, s)
	return s
}
