#!/usr/bin/env bash
# install-minio.sh — install the pinned MinIO server used by Tidemark's
# integration tests (package integration/miniotest).
#
# MinIO is built from its Go source module (no registry or release download is
# reachable on the build machines), statically (CGO_ENABLED=0) so that the
# same binary runs on the host and inside a FROM scratch image.
#
# Idempotent: nothing is built when the binary is present and its version
# matches the pin. The version is recorded in a stamp file next to the binary;
# a binary without a stamp (for example one built by hand with the same
# `go install`) is accepted when the module version embedded in it
# (`go version -m`) matches the pin.
#
# Environment:
#   TIDEMARK_CACHE   cache root (default $HOME/.cache/tidemark); the binary is
#                    installed at $TIDEMARK_CACHE/bin/minio
#   MINIO_VERSION    override the pinned module version (default below; keep it
#                    equal to miniotest.MinioVersion)
#
# The first build takes about 3-5 minutes on two cores.
set -euo pipefail

MINIO_MODULE="github.com/minio/minio"
# Keep in sync with MinioVersion in integration/miniotest/minio.go (a test
# checks that the two agree).
PINNED_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
VERSION="${MINIO_VERSION:-$PINNED_VERSION}"

CACHE="${TIDEMARK_CACHE:-$HOME/.cache/tidemark}"
BIN_DIR="$CACHE/bin"
BIN="$BIN_DIR/minio"
STAMP="$BIN_DIR/minio.version"

log() { printf 'install-minio: %s\n' "$*"; }

# embedded_version prints the minio module version recorded in the binary's
# build info, or nothing when it cannot be read.
embedded_version() {
	go version -m "$1" 2>/dev/null | awk -v m="$MINIO_MODULE" '$1 == "mod" && $2 == m { print $3; exit }'
}

if [[ -x "$BIN" ]]; then
	if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$VERSION" ]]; then
		log "$BIN is already $VERSION (stamp $STAMP); nothing to do"
		exit 0
	fi
	have="$(embedded_version "$BIN" || true)"
	if [[ "$have" == "$VERSION" ]]; then
		log "$BIN has no matching stamp but embeds $MINIO_MODULE $VERSION; writing stamp $STAMP"
		printf '%s\n' "$VERSION" >"$STAMP.tmp"
		mv "$STAMP.tmp" "$STAMP"
		exit 0
	fi
	log "$BIN is version '${have:-unknown}', want $VERSION; rebuilding"
else
	log "$BIN is missing; building $MINIO_MODULE@$VERSION"
fi

command -v go >/dev/null || { log "error: the go tool is not on PATH"; exit 1; }
mkdir -p "$BIN_DIR"

# Build into a private directory and move the result into place, so that an
# interrupted build never leaves a half-written binary where the tests look.
tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

log "running: CGO_ENABLED=0 GOBIN=$tmp go install $MINIO_MODULE@$VERSION (takes a few minutes the first time)"
start=$(date +%s)
CGO_ENABLED=0 GOBIN="$tmp" go install "$MINIO_MODULE@$VERSION"
log "built in $(( $(date +%s) - start ))s"

got="$(embedded_version "$tmp/minio" || true)"
if [[ "$got" != "$VERSION" ]]; then
	log "error: built binary reports version '${got:-unknown}', want $VERSION"
	exit 1
fi

mv -f "$tmp/minio" "$BIN"
printf '%s\n' "$VERSION" >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "installed $BIN ($VERSION); stamp $STAMP"
