#!/usr/bin/env bash
# install-nats-server.sh — install the pinned NATS server (JetStream), which
# the JetStream connector's tests run against (package integration/natstest),
# into $TIDEMARK_CACHE/bin/nats-server. Built from its Go module like MinIO;
# see install-gotool.sh. About 1-2 minutes the first time on two cores.
set -euo pipefail
# Keep in sync with NATSVersion in integration/natstest/natstest.go (a test
# checks that the two agree) and with go.mod's nats-server requirement.
VERSION="${NATS_SERVER_VERSION:-v2.15.2}"
exec bash "$(dirname "$0")/install-gotool.sh" nats-server github.com/nats-io/nats-server/v2 "$VERSION"
