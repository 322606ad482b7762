package targets

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/parse"
)

// Pod annotations the adapter reads.
const (
	AnnotationPort         = "prometheus.io/port"
	AnnotationPath         = "prometheus.io/path"
	AnnotationScrape       = "inference-metrics-adapter/scrape"
	AnnotationServer       = "inference-metrics-adapter/server"
	AnnotationMaxBatchSize = "inference-metrics-adapter/max-batch-size"
	// AnnotationFrontDoor marks a router or gateway pod as the front door of
	// the Service it names, in the pod's own namespace: the pod is scraped
	// (as with AnnotationScrape) and its held requests are served as that
	// Service's inference_front_door_pending_requests.
	AnnotationFrontDoor = "inference-metrics-adapter/front-door-for"
)

// DefaultPath is the metrics path used when the pod does not name one.
const DefaultPath = "/metrics"

// Endpoint returns the URL of pod's metrics page: port from the
// prometheus.io/port annotation, else the container port named "metrics",
// else "http", else the first container port; path from prometheus.io/path,
// else /metrics. It fails when the pod has no IP or no port.
func Endpoint(pod *corev1.Pod) (string, error) {
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("pod has no IP")
	}
	port, err := endpointPort(pod)
	if err != nil {
		return "", err
	}
	path := DefaultPath
	if p, ok := pod.Annotations[AnnotationPath]; ok && p != "" {
		if !strings.HasPrefix(p, "/") {
			return "", fmt.Errorf("annotation %s=%q: must start with /", AnnotationPath, p)
		}
		path = p
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + path, nil
}

func endpointPort(pod *corev1.Pod) (int, error) {
	if s, ok := pod.Annotations[AnnotationPort]; ok {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 1 || p > 65535 {
			return 0, fmt.Errorf("annotation %s=%q: not a port number", AnnotationPort, s)
		}
		return p, nil
	}
	var first int32
	for _, want := range []string{"metrics", "http"} {
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == want {
					return int(cp.ContainerPort), nil
				}
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			first = c.Ports[0].ContainerPort
			break
		}
	}
	if first == 0 {
		return 0, fmt.Errorf("no %s annotation and no container port", AnnotationPort)
	}
	return int(first), nil
}

// ForcedServer returns the server, built-in or one of servers' custom ones
// (nil: built-in only), named by the pod's server annotation, or
// parse.Unknown (detect from the page) when there is none.
func ForcedServer(pod *corev1.Pod, servers *parse.Servers) (parse.Server, error) {
	name, ok := pod.Annotations[AnnotationServer]
	if !ok || name == "" {
		return parse.Unknown, nil
	}
	s, ok := servers.ByName(name)
	if !ok {
		return parse.Unknown, fmt.Errorf("annotation %s=%q: unknown server", AnnotationServer, name)
	}
	return s, nil
}

// MaxBatchSize returns the pod's declared maximum batch size, if any.
func MaxBatchSize(pod *corev1.Pod) (float64, bool) {
	s, ok := pod.Annotations[AnnotationMaxBatchSize]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v, true
}

// IsRunning reports whether pod is a candidate target: phase Running with an IP.
func IsRunning(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" && pod.DeletionTimestamp == nil
}

// IsReady reports whether pod's Ready condition is true.
func IsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// FrontDoorFor returns the name of the Service pod is the front door of, and
// whether it is one. The Service is always in the pod's namespace.
func FrontDoorFor(pod *corev1.Pod) (string, bool) {
	name := strings.TrimSpace(pod.Annotations[AnnotationFrontDoor])
	return name, name != ""
}
