package contrast

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/signals"
)

// GPUResource is the extended resource whose limits count a pod's GPUs.
const GPUResource = corev1.ResourceName("nvidia.com/gpu")

// Fetch reads, through the Kubernetes API server, every signal of the pods
// matching selector in namespace, as the HPA would. A 404 for a signal means
// no pod has it and is not an error; other failures are.
func Fetch(ctx context.Context, client kubernetes.Interface, namespace, selector string) ([]Row, error) {
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing pods matching %q in %s: %w", selector, namespace, err)
	}
	byName := map[string]*Row{}
	var rows []*Row
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		r := &Row{Pod: p.Name, GPUs: podGPUs(p), Values: map[signals.Signal]float64{}}
		byName[p.Name] = r
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no running pods match %q in namespace %s", selector, namespace)
	}
	for _, s := range signals.All() {
		raw, err := client.CoreV1().RESTClient().Get().
			AbsPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces", namespace, "pods", "*", s.Name()).
			Param("labelSelector", selector).DoRaw(ctx)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", s.Name(), err)
		}
		var list struct {
			Items []struct {
				DescribedObject struct{ Name string } `json:"describedObject"`
				Value           resource.Quantity     `json:"value"`
			} `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", s.Name(), err)
		}
		for _, it := range list.Items {
			if r := byName[it.DescribedObject.Name]; r != nil {
				r.Values[s] = it.Value.AsApproximateFloat64()
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Pod < rows[j].Pod })
	out := make([]Row, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out, nil
}

func podGPUs(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[GPUResource]; ok {
			n += q.Value()
		}
	}
	return n
}
