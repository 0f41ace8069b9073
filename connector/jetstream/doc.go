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
// partition. Seek starts one ordered consumer per partition at the next
// sequence: exact replay with flow control, and nothing stored on the
// server, so the checkpoint is the only position. Batches are bounded in
// records and bytes; StopAtEnd ends a run at what the stream held at
// Seek. Seek refuses a checkpoint whose continuation the stream no
// longer holds (ErrTruncated) rather than skip records.
//
// # Sink
//
// Records go to "<stream>.<p>" of the output stream (p from the key), in
// one transaction per checkpoint, under the runtime's roll-forward
// contract: Commit must be idempotent forever and work from any node.
// Nats-Msg-Id deduplication holds only for the duplicate window, so:
//
//   - Write publishes to a staging stream "<stream>_staging";
//   - Prepare waits for the server to store every staged message and
//     appends a seal with the transaction's layout;
//   - Commit publishes each chunk to the output stream as one JetStream
//     atomic batch (nats-server 2.12+) led by a marker on
//     "<stream>.txn.<checkpoint id>.<chunk>" that the server stores only
//     while that subject is empty. A repeated commit finds its own marker
//     and succeeds; another writer's is ErrTxnConflict.
//
// Markers are kept forever, so NewSink refuses output streams with
// limits. A checkpoint with more output than one batch (1000 messages by
// default; SinkConfig.MaxBatch) commits as several atomic batches in
// order. Checkpoint ids must not be reused against one output stream.
//
// Why ordered consumers, the stall handling, the commit's headers and the
// batch limits are in docs/jetstream.md.
//
// A job spanning hosts (job.RunWorker) gives each worker a Sink with its
// slot as SinkConfig.Part: its markers go to
// "<stream>.txn.<part>.<checkpoint id>.<chunk>", so every slot commits its
// own transaction of each checkpoint. Group is a job.Group over a
// key-value bucket: the coordinator's plan (fenced by compare-and-set on
// its revision), the slots' holders and the workers' reports; workers and
// coordinator reach each other only through it and the store.
package jetstream
