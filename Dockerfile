# cuecast serve in a container: a static binary on a distroless base, non-root.
#
#   docker build --build-arg VERSION=v0.1.0 -t cuecast:v0.1.0 .
#   docker run -v cuecast-data:/data -p 8080:8080 cuecast:v0.1.0 \
#     serve --repo https://github.com/acme/configs.git --data /data --http 0.0.0.0:8080
#
# The data directory (JetStream store, signing key, generated credentials) is a
# volume: it must survive the container. Port 8080 serves /healthz and /readyz for
# probes; 4222 is the embedded NATS server, which refuses non-loopback clients
# unless credentials are configured (docs/SECURITY.md).

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
EXPOSE 4222 8080
ENTRYPOINT ["/usr/local/bin/cuecast"]
CMD ["--help"]
