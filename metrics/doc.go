// Package metrics exposes what Tidemark does as Prometheus metrics, every
// name prefixed tidemark_: BlobstoreMetrics counts a Blobstore's
// operations in thanos objstore's families, CheckpointMetrics observes a
// checkpoint Storage (saves, restores, GC, fencing, the latest completed
// checkpoint), ReplicationMetrics a blobstorage.Replicator
// (docs/replication.md); BuildInfoCollector and NewRegistry add
// tidemark_build_info and the Go runtime and process collectors, and
// Start serves a registry.
//
// A job wires them up in a few lines:
//
//	reg := metrics.NewRegistry()
//	bm, err := metrics.NewBlobstoreMetrics(reg, metrics.BlobstoreOptions{})
//	...
//	cm, err := metrics.NewCheckpointMetrics(reg)
//	...
//	bs = bm.Wrap(bs) // count every operation on the store
//	// give cm to the Storage as its Observer
//	srv, err := metrics.Start(ctx, ":9464", reg)
//	...
//	defer srv.Close()
//
// Every series of a family is created when the family is registered, at
// 0, so that rate() and alerts see it before the first event.
//
// # Metrics
//
// Labels marked "?" are present only when the option that adds them is
// set (BlobstoreOptions.KeyClass). Histograms have the usual _bucket,
// _sum and _count series.
//
//	name                                                  type       labels                      meaning
//	tidemark_objstore_operations_total                    counter    operation,key_class?        operations against the object store, ended successfully or not
//	tidemark_objstore_operation_failures_total            counter    operation,key_class?        operations that failed (a missing key, a condition that did not hold and a cancelled context are not failures)
//	tidemark_objstore_operation_duration_seconds          histogram  operation,key_class?        duration of operations that did not fail; reads until the body is closed
//	tidemark_objstore_operation_transferred_bytes_total   counter    operation,key_class?        bytes of object bodies sent (put, put_if_absent, put_if_match) or received (get, get_range)
//	tidemark_checkpoint_save_duration_seconds             histogram  result                      duration of checkpoint saves (result success or failure); _count is the number of saves (two per two-phase checkpoint: prepared, completed)
//	tidemark_checkpoint_part_save_duration_seconds        histogram  result                      duration of the parts a worker saved (Worker.SavePart); _count is the number of parts
//	tidemark_checkpoint_save_requests                     histogram  -                           object store requests made by one save
//	tidemark_checkpoint_uploaded_bytes_total              counter    -                           bytes of state files uploaded by saves and worker parts
//	tidemark_checkpoint_uploaded_files_total              counter    -                           state files uploaded by saves and worker parts
//	tidemark_checkpoint_reused_bytes_total                counter    -                           bytes of state files referenced from earlier checkpoints instead of uploaded
//	tidemark_checkpoint_reused_files_total                counter    -                           state files referenced from earlier checkpoints instead of uploaded
//	tidemark_checkpoint_restore_duration_seconds          histogram  result                      duration of restores into a local directory
//	tidemark_checkpoint_restored_bytes_total              counter    -                           bytes of state files downloaded and verified by restores
//	tidemark_checkpoint_restored_files_total              counter    -                           state files downloaded and verified by restores
//	tidemark_checkpoint_gc_duration_seconds               histogram  result                      duration of garbage collections
//	tidemark_checkpoint_gc_deleted_objects_total          counter    -                           objects deleted by garbage collection
//	tidemark_checkpoint_gc_deleted_bytes_total            counter    -                           bytes of the objects deleted by garbage collection
//	tidemark_checkpoint_gc_aborted_uploads_total          counter    -                           incomplete multipart uploads aborted by garbage collection
//	tidemark_checkpoint_gc_expired_pins_total             counter    -                           expired restore pins removed by garbage collection
//	tidemark_checkpoint_fenced_total                      counter    -                           times this writer was fenced by a newer writer epoch (it must stop)
//	tidemark_checkpoint_last_completed_timestamp_seconds  gauge      -                           Unix time at which this process last completed a checkpoint (0 before its first)
//	tidemark_replication_recovery_point_seconds           gauge      -                           how long the replica has lacked a checkpoint the source completed (0 when it holds the source's latest completed one)
//	tidemark_replication_checkpoint_duration_seconds      histogram  result                      duration of checkpoint copies to the replica; _count is the number of checkpoints copied
//	tidemark_replication_copied_bytes_total               counter    -                           bytes of objects copied to the replica, each verified against its record
//	tidemark_replication_copied_objects_total             counter    -                           objects copied to the replica
//	tidemark_replication_skipped_bytes_total              counter    -                           bytes of objects the replica held already, not sent again
//	tidemark_replication_skipped_objects_total            counter    -                           objects the replica held already, not sent again
//	tidemark_replication_last_source_completed_timestamp_seconds  gauge  -                       Unix time at which the source completed the replica's latest checkpoint
//	tidemark_build_info                                   gauge      version,revision,goversion  always 1; the labels say which build is running
//
// Failures follow thanos objstore: an answer the caller asked for (a
// missing key, blobstore.ErrPreconditionFailed) is no failure, nor is a
// cancelled context; a deadline that ran out is. Saves, restores and
// collections count their files and bytes whatever their result: the
// bytes moved all the same.
//
// # Alerting on checkpoint age
//
// The one alert every job needs, on the age of the latest completed
// checkpoint, is written out in docs/metrics.md.
package metrics
