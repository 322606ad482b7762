package targets

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DefaultPath is the metrics path used when the pod does not name one.
const DefaultPath = "/metrics"

// MaxPathLen is the longest prometheus.io/path the adapter scrapes: an
// annotation value may be hundreds of KiB, and the URL goes into every
// scrape error and log line about the pod.
const MaxPathLen = 1024

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
			return "", fmt.Errorf("annotation %s=%.64q: must start with /", AnnotationPath, p)
		}
		if len(p) > MaxPathLen {
			return "", fmt.Errorf("annotation %s=%.64q: %d bytes, more than %d", AnnotationPath, p, len(p), MaxPathLen)
		}
		path = p
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + path, nil
}

func endpointPort(pod *corev1.Pod) (int, error) {
	if s, ok := pod.Annotations[AnnotationPort]; ok {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 1 || p > 65535 {
			return 0, fmt.Errorf("annotation %s=%.64q: not a port number", AnnotationPort, s)
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
