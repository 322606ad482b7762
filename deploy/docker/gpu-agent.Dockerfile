# syntax=docker/dockerfile:1
# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# gpu-agent: built with cgo (go-nvml loads libnvidia-ml.so.1 with dlopen), so it
# runs on distroless/base (glibc). NVML itself is not in the image: the NVIDIA
# container runtime mounts it. The agent runs as root because the kubelet's
# pod-resources socket is root's; the chart drops every capability and makes
# the root filesystem read-only (see docs/gpu-agent.md).
# Build from the repository root: docker build -f deploy/docker/gpu-agent.Dockerfile .
# cgo ties the build stage to the target platform: a multi-arch build runs the
# arm64 stage under QEMU (slower, the same result).
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -o /out/gpu-agent ./cmd/gpu-agent

FROM gcr.io/distroless/base-debian12
COPY --from=build /out/gpu-agent /gpu-agent
USER 0:0
ENTRYPOINT ["/gpu-agent"]
