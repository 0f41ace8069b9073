// Package miniotest starts a real MinIO server for integration tests, and
// the other S3 servers the tests run on: versitygw and SeaweedFS, a
// second and a third S3 implementation, and a distributed MinIO of
// several nodes.
//
// Every test that talks to S3 in this module gets its server from here, so
// that the same test body runs against a container (the normal case) or a
// local process (machines without Docker) without knowing which.
//
// # Usage
//
// A test that needs a server of its own (because it stops or restarts it, or
// fills it) calls [Start]; a test that only needs a bucket shares one server
// per test binary through [Shared], which requires the package's TestMain to
// call [Main] so that the shared server is removed when the binary ends:
//
//	func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := miniotest.Shared(t)
//		bucket := srv.NewBucket(t)
//		client := srv.S3Client(t)
//		...
//	}
//
// # Modes
//
// The environment variable TIDEMARK_MINIO selects how a server is started:
//
//   - "docker": a container of the image built by [EnsureImage]. Fails the
//     test when no Docker daemon is reachable.
//   - "process": the MinIO binary run as a child process on 127.0.0.1 with a
//     free port and a temporary data directory. Fails the test when the
//     binary is missing.
//   - unset: docker when a daemon answers a ping, else process.
//
// When TIDEMARK_MINIO_ENDPOINT is set (with TIDEMARK_MINIO_ACCESS_KEY and
// TIDEMARK_MINIO_SECRET_KEY), [Start] and [Shared] use that already running
// server instead and start nothing ([Server.Mode] reports "external"); tests
// are then isolated only by bucket, and [Server.Stop], [Server.Kill] and
// [Server.Restart] skip the test with a message, since the harness does not
// own that server.
//
// Nothing is ever skipped silently: when neither Docker nor the binary is
// available the test fails with a message that says how to install MinIO
// (scripts/install-minio.sh).
//
// # The MinIO binary and image
//
// No registry is reachable on the machines this runs on, so MinIO is built
// from its Go source module at the pinned [MinioVersion] by
// scripts/install-minio.sh into $TIDEMARK_CACHE/bin/minio (default
// $HOME/.cache/tidemark/bin/minio); TIDEMARK_MINIO_BIN points elsewhere. The
// static binary goes into a FROM scratch image tagged
// tidemark-minio:<module version>, built once and reused while the tag exists.
//
// # Docker specifics
//
// The Ryuk reaper image cannot be pulled, so the harness sets
// TESTCONTAINERS_RYUK_DISABLED=true when it is unset and removes every
// container it starts itself, by id, in t.Cleanup (or in [Main] for the
// shared server). A test binary killed before its cleanups run (for example by
// the -timeout panic) therefore leaks its containers; they carry the label
// tidemark.miniotest=true so that they can be found and removed by id.
//
// The host port of a container is pinned when it is created (a free port on
// 127.0.0.1 is chosen first), so that [Server.Stop] followed by
// [Server.Restart] keeps [Server.Endpoint] unchanged, as it does in process
// mode. This assumes a local Docker daemon.
//
// Other container tests use the same Docker client, [DockerClient], and
// the same way of building a FROM scratch image from a streamed build
// context, [BuildImage]; [ContainerLogs] reads a container's output for a
// failure message.
//
// [StartOnNetwork] attaches the container to a user-defined Docker network
// under an alias, so that job containers reach it at
// [Server.NetworkEndpoint] while the test reaches it at [Server.Endpoint].
//
// # versitygw
//
// [StartVersity] and [SharedVersity] start versitygw [VersityVersion] on
// its posix backend, in the same two modes and with the same credentials;
// the Server they return is used exactly like a MinIO one. The binary is
// built by scripts/install-versitygw.sh into $TIDEMARK_CACHE/bin/versitygw
// (TIDEMARK_VERSITYGW_BIN points elsewhere) and put into a FROM scratch
// image tagged tidemark-versitygw:<version>. A process keeps object
// metadata in extended attributes (versitygw's default), a container in
// a sidecar directory, since the container's filesystem may lack them.
//
// # SeaweedFS
//
// [StartSeaweedFS] and [SharedSeaweedFS] start SeaweedFS
// [SeaweedFSVersion] (`weed server -s3`: master, volume server, filer and
// S3 gateway in one process) in the same two modes and with the same
// credentials, given to it in its S3 identity file. The binary is built
// by scripts/install-seaweedfs.sh into $TIDEMARK_CACHE/bin/weed
// (TIDEMARK_SEAWEEDFS_BIN points elsewhere) and put into a FROM scratch
// image tagged tidemark-seaweedfs:<version>. It keeps '\' in keys
// (-s3.allowBackslashInKey); [StartSeaweedFSWith] runs weed's default,
// which stores it as '/' (docs/servers.md).
//
// # Clusters
//
// [StartCluster] starts a distributed MinIO of n containers on a Docker
// network, each node a Server that can be killed and restarted alone;
// [Server.WaitWritable] waits until the cluster has write quorum again.
//
// # Process specifics
//
// A process-mode server is stopped by its own PID (SIGTERM, then SIGKILL
// after a grace period). On Linux it is also started with a parent-death
// signal, so that it does not outlive a test binary that crashes.
package miniotest
