# syntax=docker/dockerfile:1
# Tollgate worker image: `docker build -t tollgate-worker .`
#
# The build stage compiles the worker (and the embedded Temporal server and Web
# UI it can start; the first build takes a few minutes). The runtime is distroless,
# static and non-root: the binary is pure Go (SQLite is modernc's, no cgo).
# The Go image is the exact version go.mod names (GOTOOLCHAIN=local: no
# toolchain download); keep the two in step. .dockerignore keeps the context
# to what the build and the policies file need.

FROM golang:1.26.8 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/worker ./cmd/worker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /usr/local/bin/worker
COPY deploy/policies.yaml /etc/tollgate/policies.yaml
USER nonroot:nonroot
# /metrics (METRICS_ADDR); 8089 is the simulator when run as `worker sim`.
# There is no shell: health checks run `worker health` (see docker-compose.yml).
EXPOSE 9464 8089
ENTRYPOINT ["/usr/local/bin/worker"]
CMD ["serve"]
