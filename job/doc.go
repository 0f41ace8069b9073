// Package job is Tidemark's job runtime: a user's source, processor and
// sink in; recovery, state, checkpoints, exactly-once commits and stops
// with a savepoint out.
package job
