// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podresourcestest serves the kubelet's pod-resources API (List and
// Get) on a unix socket from a table the caller sets, for tests and the e2e
// harness, where there is no kubelet. It is a real gRPC server: clients
// cannot tell it from the kubelet's.
package podresourcestest

import (
	"context"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Server is a pod-resources server on a unix socket.
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	socket string
	grpc   *grpc.Server
	done   chan struct{}

	mu    sync.Mutex
	pods  []*podresourcesv1.PodResources
	lists int
}

// Start listens on the unix socket at path (which must not exist) and serves
// until Close. The server starts with no pods.
func Start(path string) (*Server, error) {
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	s := &Server{socket: path, grpc: grpc.NewServer(), done: make(chan struct{})}
	podresourcesv1.RegisterPodResourcesListerServer(s.grpc, s)
	go func() {
		defer close(s.done)
		_ = s.grpc.Serve(lis) // returns when Close stops the server
	}()
	return s, nil
}

// Socket returns the socket path the server listens on.
func (s *Server) Socket() string { return s.socket }

// Close stops the server and removes its socket.
func (s *Server) Close() {
	s.grpc.Stop()
	<-s.done
}

// SetPods replaces what List answers.
func (s *Server) SetPods(pods ...*podresourcesv1.PodResources) {
	cp := make([]*podresourcesv1.PodResources, len(pods))
	for i, p := range pods {
		cp[i] = proto.Clone(p).(*podresourcesv1.PodResources)
	}
	s.mu.Lock()
	s.pods = cp
	s.mu.Unlock()
}

// Lists returns how many List calls the server answered.
func (s *Server) Lists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// List implements the pod-resources API.
func (s *Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range s.pods {
		resp.PodResources = append(resp.PodResources, proto.Clone(p).(*podresourcesv1.PodResources))
	}
	return resp, nil
}

// Get implements the pod-resources API.
func (s *Server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		if p.GetNamespace() == req.GetPodNamespace() && p.GetName() == req.GetPodName() {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: proto.Clone(p).(*podresourcesv1.PodResources)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s/%s not found", req.GetPodNamespace(), req.GetPodName())
}

// Pod returns a pod whose single container holds the devices ids of
// resource, e.g. Pod("default", "vllm-0", "server", "nvidia.com/gpu", uuid).
func Pod(namespace, name, container, resource string, ids ...string) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{
		Namespace: namespace,
		Name:      name,
		Containers: []*podresourcesv1.ContainerResources{{
			Name:    container,
			Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}},
		}},
	}
}
