# cuecast serve in a container: a static binary on a distroless base, non-root.
# No image is published (no release is tagged yet); build it from a clone, with the
# commit and its date so that `cuecast version` names them (without, "unknown"):
#
#   docker build -t cuecast:devel --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) --build-arg DATE=$(git log -1 --format=%cI) .
#   docker run -v cuecast-data:/data -p 8080:8080 cuecast:devel \
#     serve --repo https://github.com/acme/configs.git --data /data --http 0.0.0.0:8080
#
# The data directory (JetStream store, signing key, generated credentials) is a
# volume: it must survive the container. Port 8080 serves /healthz and /readyz for
# probes. The embedded NATS server listens on loopback (127.0.0.1:4222) unless serve
# is started with --listen 0.0.0.0:4222 --secure (docs/SECURITY.md), so 4222 is not
# exposed by default: add -p 4222:4222 (and EXPOSE in an image of your own) with
# --secure. deploy/kubernetes/manifests_test.go holds the manifests to this tag.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=unknown
ARG DATE=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -buildid= \
        -X github.com/cuecast/cuecast/internal/buildinfo.version=${VERSION} \
        -X github.com/cuecast/cuecast/internal/buildinfo.commit=${COMMIT} \
        -X github.com/cuecast/cuecast/internal/buildinfo.date=${DATE}" \
      -o /out/cuecast ./cmd/cuecast

# static-debian12 has CA certificates (for cloning over HTTPS), /etc/passwd with
# the nonroot user (65532) and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/cuecast /usr/local/bin/cuecast
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/cuecast"]
CMD ["--help"]
