#!/usr/bin/env bash
# install-gotool.sh NAME PACKAGE VERSION — build a pinned Go program from the
# Go module proxy into $TIDEMARK_CACHE/bin/NAME, the way install-minio.sh
# builds MinIO: statically (CGO_ENABLED=0, so the binary also runs in a FROM
# scratch image), version-stamped, idempotent.
#
#   NAME     the installed binary's name (versitygw, rclone, mc)
#   PACKAGE  the main package to `go install` (github.com/rclone/rclone)
#   VERSION  the module version (v1.76.0, or a pseudo-version)
#
# Nothing is built when $TIDEMARK_CACHE/bin/NAME exists and its stamp file
# NAME.version records VERSION, or when the module version embedded in the
# binary (`go version -m`) is VERSION. Builds go to a private directory and
# are moved into place, so an interrupted build never leaves a half-written
# binary; a lock file serialises concurrent installs of the same NAME (two
# test runs starting at once build it once).
#
# Environment: TIDEMARK_CACHE (default $HOME/.cache/tidemark).
set -euo pipefail

if [[ $# -ne 3 ]]; then
	echo "usage: $0 NAME PACKAGE VERSION" >&2
	exit 2
fi
NAME="$1" PACKAGE="$2" VERSION="$3"

CACHE="${TIDEMARK_CACHE:-$HOME/.cache/tidemark}"
BIN_DIR="$CACHE/bin"
BIN="$BIN_DIR/$NAME"
STAMP="$BIN_DIR/$NAME.version"

log() { printf 'install-%s: %s\n' "$NAME" "$*"; }

# embedded_version prints the version of the main module recorded in the
# binary's build info, or nothing when it cannot be read.
embedded_version() {
	go version -m "$1" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

installed() {
	[[ -x "$BIN" ]] || return 1
	if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$VERSION" ]]; then
		return 0
	fi
	if [[ "$(embedded_version "$BIN" || true)" == "$VERSION" ]]; then
		printf '%s\n' "$VERSION" >"$STAMP.tmp"
		mv "$STAMP.tmp" "$STAMP"
		return 0
	fi
	return 1
}

if installed; then
	log "$BIN is already $VERSION; nothing to do"
	exit 0
fi

command -v go >/dev/null || { log "error: the go tool is not on PATH"; exit 1; }
mkdir -p "$BIN_DIR"

exec 9>"$BIN_DIR/.$NAME.lock"
if ! flock -n 9; then
	log "another install of $NAME is running; waiting for it"
	flock 9
	if installed; then
		log "$BIN is now $VERSION (installed by the other run)"
		exit 0
	fi
fi

tmp="$(mktemp -d "$BIN_DIR/.build-$NAME.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

log "running: CGO_ENABLED=0 GOBIN=$tmp go install $PACKAGE@$VERSION"
start=$(date +%s)
CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "$PACKAGE@$VERSION"
log "built in $(( $(date +%s) - start ))s"

got="$(embedded_version "$tmp/$NAME" || true)"
if [[ "$got" != "$VERSION" ]]; then
	log "error: built binary reports version '${got:-unknown}', want $VERSION"
	exit 1
fi
mv -f "$tmp/$NAME" "$BIN"
printf '%s\n' "$VERSION" >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "installed $BIN ($VERSION)"
