# The tidemark CLI in an image with nothing else in it: a static binary
# (CGO_ENABLED=0), the CA certificates it needs to reach S3 over TLS, and
# /tmp and /data owned by the user it runs as, which is not root.
#
# Build it with `make docker` (image tidemark:dev). The binary is built on
# the host and copied in, so the build pulls no base image and needs no
# registry; `make docker` stages exactly these files in bin/docker/:
#
#   tidemark                 CGO_ENABLED=0 go build -trimpath ./cmd/tidemark
#   ca-certificates.crt      the host's CA bundle
#   tmp/, data/              empty directories
#
# Run it:
#
#   docker run --rm tidemark:dev --help
#   docker run --rm -v tidemark-data:/data tidemark:dev demo
#   docker run --rm -e AWS_REGION -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY \
#       tidemark:dev ls --store s3://bucket/jobs/wordcount
FROM scratch

COPY bin/docker/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
# Owned by the runtime user: restores and the CLI's writer role stage
# state in temporary directories, and the demo keeps its store under the
# working directory (a named volume mounted on /data starts with this
# ownership).
COPY --chown=65532:65532 bin/docker/tmp /tmp
COPY --chown=65532:65532 bin/docker/data /data
COPY bin/docker/tidemark /usr/local/bin/tidemark

# 65532 is the conventional "nonroot" id of minimal images; numeric, as
# there is no /etc/passwd to look a name up in.
USER 65532:65532
WORKDIR /data
ENV TMPDIR=/tmp
ENTRYPOINT ["/usr/local/bin/tidemark"]
