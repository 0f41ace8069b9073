#!/usr/bin/env bash
# install-peers.sh — install the tools `make bench-peers` compares Tidemark
# with, rclone and mc, from the Go module proxy into $TIDEMARK_CACHE/bin
# (see install-gotool.sh). The first build takes several minutes each.
#
# mc has no semver tags on the module proxy; the pin is the newest commit
# the proxy serves (2025-11-06), the closest to the pinned MinIO
# (2026-02-12): mc's repository has had no commit since.
set -euo pipefail
# Keep in sync with integration/peerbench (RcloneVersion, McVersion).
RCLONE_VERSION="${RCLONE_VERSION:-v1.76.0}"
MC_VERSION="${MC_VERSION:-v0.0.0-20251106162529-77f82e18b540}"
here="$(dirname "$0")"
bash "$here/install-gotool.sh" rclone github.com/rclone/rclone "$RCLONE_VERSION"
bash "$here/install-gotool.sh" mc github.com/minio/mc "$MC_VERSION"
