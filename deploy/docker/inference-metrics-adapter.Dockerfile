# syntax=docker/dockerfile:1
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# inference-metrics-adapter: a static Go binary on distroless/static, non-root.
# Build from the repository root: docker build -f deploy/docker/inference-metrics-adapter.Dockerfile .
# The build stage runs on the builder's own platform and cross-compiles for the
# target one (TARGETOS/TARGETARCH, set by BuildKit and buildah): a multi-arch
# build needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26.8 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags "-s -w" -o /out/inference-metrics-adapter ./cmd/inference-metrics-adapter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/inference-metrics-adapter /inference-metrics-adapter
USER 65532:65532
ENTRYPOINT ["/inference-metrics-adapter"]
