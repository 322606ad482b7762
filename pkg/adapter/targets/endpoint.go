// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

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

// Endpoint returns the http:// URL of pod's metrics page: port from the
// prometheus.io/port annotation, else the container port named "metrics",
// else "http", else the first container port; path from prometheus.io/path,
// else /metrics. It fails when the pod has no IP or no port.
func Endpoint(pod *corev1.Pod) (string, error) {
	return endpointURL(pod, SchemeHTTP)
}

// endpointURL is Endpoint with the given scheme.
func endpointURL(pod *corev1.Pod, scheme string) (string, error) {
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
		if i, ok := urlPathOK(p); !ok {
			return "", fmt.Errorf("annotation %s=%.64q: byte %d (%.4q) is not valid in a URL path (want RFC 3986 characters, others percent-encoded)", AnnotationPath, p, i, p[i:])
		}
		path = p
	}
	return scheme + "://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + path, nil
}

// urlPathOK reports whether p holds only what RFC 3986 allows in a path
// and query (unreserved and sub-delims characters, ':', '@', '/', '?', and
// '%' followed by two hex digits), else the offset of the first byte that
// is not. Every control character, space, quote, backslash, '#' and
// non-ASCII byte is refused: the path goes into the scrape URL, and so into
// scrape errors, log lines and 404 reasons about the pod, where a newline
// or an ESC could forge a line or drive a terminal.
func urlPathOK(p string) (int, bool) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/?", c) >= 0:
		case c == '%' && i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2]):
			i += 2
		default:
			return i, false
		}
	}
	return 0, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
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
