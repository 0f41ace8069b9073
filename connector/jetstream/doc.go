// Package jetstream connects a Tidemark job (package job) to NATS
// JetStream: a partitioned, replayable Source and an exactly-once Sink.
//
// # Source
//
// The input is a stream of P partitions, the subjects "<stream>.<p>"
// (CreateInputStream makes one; NewMsg builds a message from a record,
// the key in the Tidemark-Key header). A Source reads the partitions it
// is given, so a worker can read a subset. Its offsets, stored in every
// checkpoint, are JSON:
//
//	{"stream":"in","partitions":{"0":1234,"2":1190}}
//
// each the stream sequence of the last record returned from that
// partition. Seek starts one ordered consumer per partition, filtered to
// its subject, at the next sequence. Ordered consumers were chosen over
// direct gets by sequence because they give exact replay with flow
// control for free: the server pushes at most InFlight messages per
// partition ahead of Next, the client keeps them in order and recreates
// the consumer from the last delivered sequence after a gap, a reconnect
// or a server restart, and nothing is acknowledged or stored on the
// server, so the checkpoint is the only position. A direct get costs a
// round trip per message (or a batch API nats.go lacks). Batches are
// bounded in records and bytes; Next returns an empty batch after Wait
// with nothing new. StopAtEnd bounds a run at the sequences present at
// Seek (io.EOF after them), for tests and demos. Seek refuses offsets
// of another stream, and a checkpoint whose continuation the stream no
// longer holds (ErrTruncated) rather than skip records.
//
// # Sink
//
// Records go to "<stream>.<p>" of the output stream (p from the key), in
// one transaction per checkpoint, under the runtime's roll-forward
// contract: Commit must be idempotent forever and work from any node.
// Nats-Msg-Id deduplication alone cannot give that, since it holds only
// for the stream's duplicate window.
//
//   - Write publishes the records to a staging stream "<stream>_staging",
//     on the txn's own subject. Nothing is on the output stream.
//   - Prepare waits for every staged message's acknowledgement (stored by
//     the server) and appends a seal naming the txn and its layout: how
//     many records, cut into chunks of how many messages and bytes.
//   - Commit reads the sealed staging and publishes each chunk to the
//     output stream as one JetStream atomic batch (ADR-50, nats-server
//     2.12+, in raw headers: nats.go v1.55.0 has no API for it). The first
//     message of the batch is a marker on "<stream>.txn.<checkpoint id>.<chunk>"
//     with Nats-Expected-Last-Subject-Sequence: 0, so the server stores
//     the batch only while that subject is empty, and the whole batch or
//     nothing. A repeated commit of the chunk is rejected whole; the sink
//     reads the marker, and one naming this txn means the chunk is in
//     (success, nothing published twice). A marker naming another writer's
//     txn of the same checkpoint id is ErrTxnConflict: a zombie's txn that
//     was never persisted as prepared cannot publish after the takeover.
//     Markers are kept forever (NewSink refuses output streams with age,
//     count or byte limits, or non-limits retention), so idempotence
//     does not expire. Staging is purged after the commit.
//
// A consumer that filters "<stream>.*" never sees markers (they have more
// tokens) and sees records only once committed.
//
// An atomic batch is limited to 1000 messages by default at nats-server
// v2.15.2 (jetstream.limits.batch.max_msgs). A checkpoint with more output
// is committed as several batches in order, each with its own marker;
// each is atomic and idempotent, but a consumer may see the first chunks
// of a checkpoint before the last: the checkpoint becomes visible in
// steps within one Commit. Every node commits the same chunks because the
// layout is fixed in the seal at Prepare. SinkConfig.MaxBatch must not
// exceed the server's limit.
//
// A job spanning hosts (job.RunWorker) gives each worker a Sink with its
// slot as SinkConfig.Part: its markers go to
// "<stream>.txn.<part>.<checkpoint id>.<chunk>", so every slot commits its
// own transaction of each checkpoint.
//
// # Group
//
// Group is a job.Group over a key-value bucket: the coordinator's plan
// (fenced by compare-and-set on its revision), the slots' holders and the
// workers' reports. Workers and coordinator reach each other only through
// it and the store; see docs/jetstream.md.
//
// Checkpoint ids must not be reused against the same output stream: a new
// job run from an old savepoint whose ids restart needs a new output
// stream, or its commits are refused as conflicts.
package jetstream
