#!/usr/bin/env bash
# install-versitygw.sh — install the pinned versitygw S3 gateway (Apache-2.0),
# the second S3 implementation the integration tests run on (package
# integration/miniotest), into $TIDEMARK_CACHE/bin/versitygw. Built from its
# Go module like MinIO; see install-gotool.sh. About 2-4 minutes the first
# time on two cores.
set -euo pipefail
# Keep in sync with VersityVersion in integration/miniotest/versitygw.go (a
# test checks that the two agree).
VERSION="${VERSITYGW_VERSION:-v1.8.0}"
exec bash "$(dirname "$0")/install-gotool.sh" versitygw github.com/versity/versitygw/cmd/versitygw "$VERSION"
