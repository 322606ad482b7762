package targets

import (
	"fmt"
	"math"
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
	// the Service it names, or of the InferencePool it names as
	// inferencepool/<name> (FrontDoorPoolPrefix), in the pod's own
	// namespace: the pod is scraped (as with AnnotationScrape) and its held
	// requests are served as that object's inference_front_door_pending_requests.
	AnnotationFrontDoor = "inference-metrics-adapter/front-door-for"
)

// FrontDoorPoolPrefix starts an AnnotationFrontDoor value that names an
// InferencePool rather than a Service.
const FrontDoorPoolPrefix = "inferencepool/"

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
		return parse.Unknown, fmt.Errorf("annotation %s=%.64q: unknown server", AnnotationServer, name)
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
	// ParseFloat takes "Inf" and "NaN": batch ÷ +Inf would be a fake 0.
	if err != nil || !(v > 0) || math.IsInf(v, 1) {
		return 0, false
	}
	return v, true
}

// FrontDoorFor returns what pod is the front door of (a Service's name, or
// inferencepool/<name>), and whether it is one. The object is always in the
// pod's namespace.
func FrontDoorFor(pod *corev1.Pod) (string, bool) {
	name := strings.TrimSpace(pod.Annotations[AnnotationFrontDoor])
	return name, name != ""
}
