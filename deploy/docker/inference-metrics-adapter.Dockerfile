# syntax=docker/dockerfile:1
# inference-metrics-adapter: a static Go binary on distroless/static, non-root.
# Build from the repository root: docker build -f deploy/docker/inference-metrics-adapter.Dockerfile .
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/inference-metrics-adapter ./cmd/inference-metrics-adapter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/inference-metrics-adapter /inference-metrics-adapter
USER 65532:65532
ENTRYPOINT ["/inference-metrics-adapter"]
