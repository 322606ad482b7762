// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podresources owns the agent's conversation with the kubelet's
// pod-resources API (k8s.io/kubelet/pkg/apis/podresources/v1) over its unix
// socket: it lists which devices the kubelet allocated to which container.
package podresources

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultSocket is where the kubelet serves the pod-resources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessageSize bounds one List answer, as the kubelet's own client does.
const maxMessageSize = 16 << 20

// Allocation is one group of devices of one resource allocated to one
// container, e.g. two nvidia.com/gpu devices of container "server".
type Allocation struct {
	Namespace    string
	Pod          string
	Container    string
	ResourceName string
	DeviceIDs    []string
}

// Lister lists the current device allocations of the node.
type Lister interface {
	List(ctx context.Context) ([]Allocation, error)
}

var _ Lister = (*Client)(nil)

// Client is a Lister over the kubelet's pod-resources socket.
type Client struct {
	socket  string
	timeout time.Duration
	conn    *grpc.ClientConn
	client  podresourcesv1.PodResourcesListerClient
}

// NewClient returns a Client for the socket at path. It does not connect:
// each List connects as needed and is bounded by timeout, so the kubelet may
// start (or restart) after the agent.
func NewClient(path string, timeout time.Duration) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize)),
		// Reconnect within seconds after a kubelet restart, not gRPC's
		// default of up to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: timeout,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("pod-resources client for %s: %w", path, err)
	}
	return &Client{socket: path, timeout: timeout, conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn)}, nil
}

// List returns every device allocation the kubelet reports, one per
// container and resource.
func (c *Client) List(ctx context.Context) ([]Allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("pod-resources List on %s: %w", c.socket, err)
	}
	return Allocations(resp), nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Allocations flattens a List answer into one Allocation per container and
// resource that has devices.
func Allocations(resp *podresourcesv1.ListPodResourcesResponse) []Allocation {
	var out []Allocation
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			for _, dev := range ctr.GetDevices() {
				if len(dev.GetDeviceIds()) == 0 {
					continue
				}
				out = append(out, Allocation{
					Namespace:    pod.GetNamespace(),
					Pod:          pod.GetName(),
					Container:    ctr.GetName(),
					ResourceName: dev.GetResourceName(),
					DeviceIDs:    dev.GetDeviceIds(),
				})
			}
		}
	}
	return out
}
