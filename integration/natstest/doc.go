// Package natstest starts a real NATS server with JetStream for tests: the
// pinned nats-server binary as a child process, the same binary in a FROM
// scratch container, or the server library in-process.
//
// # Usage
//
//	srv := natstest.Start(t)           // mode chosen by TIDEMARK_NATS
//	nc := srv.Connect(t)               // authenticated, closed in cleanup
//	js, _ := jetstream.New(nc)
//
// Every server has JetStream on, a temporary store directory, listens on
// 127.0.0.1 only, and requires the user and password in [Server.User] and
// [Server.Password]: a client without them is refused. [Options.MaxBatch]
// lowers the server's atomic batch limit (1000 messages by default), so a
// test can exercise output that needs several batches without writing
// thousands of messages.
//
// # Modes
//
// TIDEMARK_NATS selects how [Start] runs the server:
//
//   - "process" (the default): the binary as a child process on a free
//     port. Fast, and what the machines here run best.
//   - "docker": a container of the image [EnsureImage] builds.
//   - "embedded": the nats-server/v2/server package inside the test binary.
//
// [StartProcess], [StartDocker] and [StartEmbedded] choose explicitly.
// Nothing is skipped silently: a missing binary fails the test with the
// command that installs it; [StartDocker] fails when no Docker daemon
// answers (callers that also run elsewhere use [DockerAvailable] and say so
// loudly when they skip).
//
// # The binary and the image
//
// scripts/install-nats-server.sh builds nats-server [NATSVersion] from its
// Go module into $TIDEMARK_CACHE/bin/nats-server (TIDEMARK_NATS_BIN points
// elsewhere). No registry is reachable, so the image tidemark-nats:<version>
// is FROM scratch with that static binary, built once through
// miniotest.BuildImage.
//
// # Clusters
//
// [StartCluster] starts n processes routed into one JetStream cluster on
// 127.0.0.1, for streams of several replicas; each node is a Server that
// can be killed and restarted alone, and [Cluster.Connect] fails over
// between them. [StartDockerCluster] does the same with containers on a
// test's Docker network: containers of the job reach the nodes at
// [DockerCluster.NetworkURL], the test through the embedded Cluster.
//
// # Cleanup
//
// A process is stopped by its own PID (SIGTERM, then SIGKILL), and on Linux
// it also dies with the test binary (parent-death signal). A container is
// removed by its id. Both happen in t.Cleanup. [Server.Kill] and
// [Server.Restart] stop and start the same server on the same port and
// store, for crash tests.
package natstest
