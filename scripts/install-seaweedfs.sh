#!/usr/bin/env bash
# install-seaweedfs.sh — build the pinned SeaweedFS server (`weed`, whose S3
# gateway is the third server of Tidemark's integration tests, package
# integration/miniotest) from the Go module proxy into $TIDEMARK_CACHE/bin/weed.
#
# `go install github.com/seaweedfs/seaweedfs/weed@VERSION` refuses the module:
# its go.mod has a replace directive, and go install ignores nothing of that
# kind. So the build runs in a throwaway wrapper module that requires
# seaweedfs at the pin and repeats its one replace
#   github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
# (the original repository was deleted; seaweedfs's go.mod says why), then
# builds weed's main package (weed/weed.go, package main) from that module.
# The build is static (CGO_ENABLED=0), so the binary also runs in a FROM
# scratch image, like MinIO's and versitygw's.
#
# Idempotent, like install-gotool.sh: nothing is built when the binary exists
# and its stamp weed.version records the pin, or when the seaweedfs module
# version embedded in it (`go version -m`) is the pin. A lock file serialises
# concurrent installs; builds go to a private directory, moved into place.
#
# Environment:
#   TIDEMARK_CACHE      cache root (default $HOME/.cache/tidemark)
#   SEAWEEDFS_VERSION   override the pin (keep it equal to
#                       miniotest.SeaweedFSVersion; a test checks the two agree)
#
# The first build takes about 5 minutes on two cores.
set -euo pipefail

MODULE="github.com/seaweedfs/seaweedfs"
# Keep in sync with SeaweedFSVersion in integration/miniotest/seaweedfs.go.
PINNED_VERSION="v0.0.0-20261109003541-7506e5f91cd6"
VERSION="${SEAWEEDFS_VERSION:-$PINNED_VERSION}"

CACHE="${TIDEMARK_CACHE:-$HOME/.cache/tidemark}"
BIN_DIR="$CACHE/bin"
BIN="$BIN_DIR/weed"
STAMP="$BIN_DIR/weed.version"

log() { printf 'install-seaweedfs: %s\n' "$*"; }

# embedded_version prints the seaweedfs module version recorded in the
# binary's build info, or nothing. The build info names the module of the
# main package ("mod"), here seaweedfs itself, not the wrapper.
embedded_version() {
	go version -m "$1" 2>/dev/null | awk -v m="$MODULE" '($1 == "mod" || $1 == "dep") && $2 == m { print $3; exit }'
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

exec 9>"$BIN_DIR/.weed.lock"
if ! flock -n 9; then
	log "another install of weed is running; waiting for it"
	flock 9
	if installed; then
		log "$BIN is now $VERSION (installed by the other run)"
		exit 0
	fi
fi

tmp="$(mktemp -d "$BIN_DIR/.build-weed.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# The wrapper module: a require of the pin and the one replace. `go build
# -mod=mod` resolves the rest of the graph and writes go.sum.
mkdir -p "$tmp/wrap"
cat >"$tmp/wrap/go.mod" <<EOF
module tidemark.invalid/weedbuild

go 1.26

require $MODULE $VERSION

replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
EOF

log "building $MODULE/weed@$VERSION in a wrapper module (takes about 5 minutes the first time)"
start=$(date +%s)
(
	cd "$tmp/wrap"
	CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off \
		go build -trimpath -o "$tmp/weed" "$MODULE/weed"
)
log "built in $(( $(date +%s) - start ))s"

got="$(embedded_version "$tmp/weed" || true)"
if [[ "$got" != "$VERSION" ]]; then
	log "error: built binary embeds $MODULE '${got:-unknown}', want $VERSION"
	exit 1
fi
mv -f "$tmp/weed" "$BIN"
printf '%s\n' "$VERSION" >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
log "installed $BIN ($VERSION)"
