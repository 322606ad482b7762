// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
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
	// AnnotationScheme is http (the default) or https, as Prometheus's
	// pod annotations write it; it wins over the server's scheme in
	// --server-config.
	AnnotationScheme = "prometheus.io/scheme"
	// AnnotationTLSServerName is the name an https pod's certificate must
	// be valid for; without it, the pod's DNS name
	// <ip with dashes>.<namespace>.pod (PodDNSName).
	AnnotationTLSServerName = "inference-metrics-adapter/tls-server-name"
	// AnnotationScrapeAuth is "bearer" when the pod's page wants the
	// adapter's bearer token (over https only), or "none"; it wins over the
	// server's auth in --server-config.
	AnnotationScrapeAuth = "inference-metrics-adapter/scrape-auth"
)

// Schemes and auth values of the annotations and of --server-config.
const (
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
	AuthBearer  = "bearer"
	AuthNone    = "none"
)

// MaxServerNameLen is the longest TLS server name accepted (a DNS name's).
const MaxServerNameLen = 253

// ScrapeSettings are how the pods of one server (named by their
// inference-metrics-adapter/server annotation) are scraped when their own
// annotations do not say: from --server-config. The zero value is http
// without credentials.
type ScrapeSettings struct {
	Scheme string // SchemeHTTP, SchemeHTTPS, or "" (http)
	Auth   string // AuthBearer, AuthNone, or "" (none)
}

// scrapeSettings returns how pod is scraped: scheme and auth from its
// annotations, else from def (server's entry in --server-config; server is
// "" when def is none), else http without credentials; the TLS server name
// of an https pod from its annotation, else PodDNSName. An error names
// where the setting it refuses came from: the annotation, or the server in
// --server-config.
func scrapeSettings(pod *corev1.Pod, def ScrapeSettings, server string) (scheme, serverName string, auth scrape.Auth, err error) {
	scheme = def.Scheme
	v, schemeAnnotated := pod.Annotations[AnnotationScheme]
	if schemeAnnotated {
		scheme = strings.TrimSpace(v)
	}
	// from names where a setting came from, for an error only.
	from := func(annotated bool, annotation, value string) string {
		switch {
		case annotated:
			return fmt.Sprintf("annotation %s=%.64q", annotation, value)
		case value == "":
			return "the default"
		}
		return fmt.Sprintf("--server-config server %.64q", server)
	}
	switch scheme {
	case "", SchemeHTTP:
	case SchemeHTTPS:
	default:
		return "", "", 0, fmt.Errorf("%s: want http or https", from(schemeAnnotated, AnnotationScheme, scheme))
	}
	authName := def.Auth
	v, authAnnotated := pod.Annotations[AnnotationScrapeAuth]
	if authAnnotated {
		authName = strings.TrimSpace(v)
	}
	switch authName {
	case "", AuthNone:
		auth = scrape.AuthNone
	case AuthBearer:
		auth = scrape.AuthBearer
		if scheme != SchemeHTTPS {
			return "", "", 0, bearerOverHTTP(authAnnotated, server, from(schemeAnnotated, AnnotationScheme, scheme))
		}
	default:
		return "", "", 0, fmt.Errorf("%s: want bearer or none", from(authAnnotated, AnnotationScrapeAuth, authName))
	}
	if scheme == "" {
		scheme = SchemeHTTP
	}
	if scheme == SchemeHTTPS {
		serverName = PodDNSName(pod)
		if v, ok := pod.Annotations[AnnotationTLSServerName]; ok {
			if serverName, err = checkServerName(strings.TrimSpace(v)); err != nil {
				return "", "", 0, err
			}
		}
	}
	return scheme, serverName, auth, nil
}

// bearerOverHTTP is the error of a pod that asks for the bearer token (its
// annotation when annotated, else its server's auth: bearer in
// --server-config) over plain http (schemeFrom: its scheme annotation, its
// server's entry in --server-config, or the default).
func bearerOverHTTP(annotated bool, server, schemeFrom string) error {
	if annotated {
		return fmt.Errorf("annotation %s=bearer: the bearer token is only sent over https, and the scheme is http (from %s; set %s: https)", AnnotationScrapeAuth, schemeFrom, AnnotationScheme)
	}
	return fmt.Errorf("--server-config server %.64q sets auth: bearer: the bearer token is only sent over https, and the scheme is http (from %s; set %s: https)", server, schemeFrom, AnnotationScheme)
}

// PodDNSName is the pod's DNS name without the cluster domain,
// <ip with dashes>.<namespace>.pod (10-0-0-5.llm.pod; fd00--5.llm.pod for
// fd00::5), the default TLS server name of an https pod.
func PodDNSName(pod *corev1.Pod) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(pod.Status.PodIP) + "." + pod.Namespace + ".pod"
}

// checkServerName accepts an IP address or a DNS name: labels of letters,
// digits and inner '-' (no wildcard: a certificate is checked for a name,
// not a pattern).
func checkServerName(name string) (string, error) {
	if net.ParseIP(name) != nil {
		return name, nil
	}
	if name == "" || len(name) > MaxServerNameLen {
		return "", fmt.Errorf("annotation %s=%.64q: want a DNS name of 1 to %d bytes or an IP address", AnnotationTLSServerName, name, MaxServerNameLen)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("annotation %s=%.64q: not a DNS name", AnnotationTLSServerName, name)
		}
		for i := range len(label) {
			switch c := label[i]; {
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-':
			default:
				return "", fmt.Errorf("annotation %s=%.64q: not a DNS name", AnnotationTLSServerName, name)
			}
		}
	}
	return name, nil
}

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
