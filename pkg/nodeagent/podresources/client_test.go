// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package podresources_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/nodeagent/podresources/podresourcestest"
)

func TestClientList(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	srv, err := podresourcestest.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	twoContainers := &podresourcesv1.PodResources{
		Namespace: "team-a",
		Name:      "trainer",
		Containers: []*podresourcesv1.ContainerResources{
			{Name: "main", Devices: []*podresourcesv1.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"GPU-1", "GPU-2"}},
				{ResourceName: "example.com/nic", DeviceIds: []string{"nic0"}},
			}},
			{Name: "sidecar"}, // no devices
			{Name: "empty", Devices: []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu"}}},
		},
	}
	srv.SetPods(
		podresourcestest.Pod("default", "vllm-0", "server", "nvidia.com/gpu", "GPU-0"),
		twoContainers,
		podresourcestest.Pod("default", "cpu-only", "app", "nvidia.com/gpu"),
	)

	c, err := podresources.NewClient(sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []podresources.Allocation{
		{Namespace: "default", Pod: "vllm-0", Container: "server", ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"GPU-0"}},
		{Namespace: "team-a", Pod: "trainer", Container: "main", ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"GPU-1", "GPU-2"}},
		{Namespace: "team-a", Pod: "trainer", Container: "main", ResourceName: "example.com/nic", DeviceIDs: []string{"nic0"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if srv.Lists() != 1 {
		t.Errorf("server answered %d Lists, want 1", srv.Lists())
	}
}

// A kubelet that is not there yet gives a bounded error; once it serves,
// the same client lists without being recreated.
func TestClientKubeletLater(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	c, err := podresources.NewClient(sock, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.List(context.Background()); err == nil {
		t.Fatal("List without a server succeeded")
	}

	srv, err := podresourcestest.Start(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetPods(podresourcestest.Pod("ns", "p", "c", "nvidia.com/gpu", "GPU-0"))
	var got []podresources.Allocation
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got, last = c.List(ctx)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("client did not reconnect within 10s: %v", last)
	}
	if len(got) != 1 || got[0].Pod != "p" {
		t.Fatalf("got %+v", got)
	}
}
