// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gpuPod is a pod bound to node that requests n GPUs.
func gpuPod(name, node string, n int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name:      "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(n), resource.DecimalSI)}},
		}}},
	}
}

// TestAddGPUNode: every node the stand-in models has FakeGPUs GPUs of its
// own, its own socket and, on the sim backend, its own map; a pod takes
// its node's GPUs, NodeName's when unbound; an unknown node is refused.
func TestAddGPUNode(t *testing.T) {
	k := &Kubelet{runners: map[string]podRunner{}, pods: map[string]*simPod{}, cancel: func() {}}
	dir, dir2 := t.TempDir(), t.TempDir()
	if err := k.AddGPUNode("n2", dir2); err == nil || !strings.Contains(err.Error(), "before EnableGPUs") {
		t.Errorf("AddGPUNode before EnableGPUs: %v", err)
	}
	if err := k.EnableGPUs("agent", dir); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := k.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := k.UseSimGPUs(dir); err != nil {
		t.Fatal(err)
	}
	if err := k.AddGPUNode("n2", dir2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", NodeName, "n2"} {
		if err := k.AddGPUNode(name, t.TempDir()); err == nil {
			t.Errorf("AddGPUNode(%q): no error for a taken or empty name", name)
		}
	}
	if err := k.UseSimGPUs(dir); err == nil {
		t.Error("UseSimGPUs after AddGPUNode: no error")
	}
	k.mu.Lock()
	first, err := k.nodeGPUs(NodeName)
	unbound, _ := k.nodeGPUs("")
	second, err2 := k.nodeGPUs("n2")
	_, err3 := k.nodeGPUs("n3")
	k.mu.Unlock()
	if err != nil || err2 != nil || first != unbound || first == second || first == nil || second == nil {
		t.Fatalf("nodeGPUs: %p %p %p, %v %v; want NodeName's for no node and n2's its own", first, unbound, second, err, err2)
	}
	if err3 == nil || !strings.Contains(err3.Error(), `"n3"`) {
		t.Errorf("nodeGPUs(n3): %v, want an error naming the node", err3)
	}
	if first.socket() == second.socket() {
		t.Errorf("both nodes serve %s", first.socket())
	}
	if _, err := first.allocate("ns/a", gpuPod("a", NodeName, FakeGPUs), "http://a"); err != nil {
		t.Fatal(err)
	}
	if _, err := second.allocate("ns/b", gpuPod("b", "n2", FakeGPUs), "http://b"); err != nil {
		t.Fatalf("n2's GPUs, NodeName's all taken: %v", err)
	}
	if _, err := second.allocate("ns/c", gpuPod("c", "n2", 1), "http://c"); err == nil || !strings.Contains(err.Error(), "n2") {
		t.Errorf("a ninth GPU on n2: %v, want an error naming n2", err)
	}
	for _, tc := range []struct{ file, url string }{{filepath.Join(dir, "sim-gpus.json"), "http://a"}, {filepath.Join(dir2, "sim-gpus.json"), "http://b"}} {
		raw, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]string
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if len(m) != FakeGPUs {
			t.Errorf("%s maps %d GPUs, want %d", tc.file, len(m), FakeGPUs)
		}
		for uuid, url := range m {
			if url != tc.url {
				t.Errorf("%s: %s held by %s, want %s", tc.file, uuid, url, tc.url)
			}
		}
	}
	k.releaseGPUs("ns/b")
	if _, err := second.allocate("ns/c", gpuPod("c", "n2", 1), "http://c"); err != nil {
		t.Errorf("n2 after its pod left: %v", err)
	}
}
