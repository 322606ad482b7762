// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package targets

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/agentpage"
	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/scrape"
)

// Reasons a gpu-agent's report about a pod is rejected, as the reason label
// of inference_metrics_adapter_gpu_agent_rejected_pods_total.
const (
	RejectUntrustedAgent = "untrusted_agent" // the reporting pod is no longer a trusted agent
	RejectUnknownPod     = "unknown_pod"     // the reported pod is not in the pod cache
	RejectOtherNode      = "other_node"      // the reported pod runs on another node than the agent
)

// AgentTrust decides which pods are gpu-agents. A pod is trusted as an agent
// only when it is in Namespace, matches Selector, and its controller is a
// DaemonSet: a tenant who labels a pod like an agent elsewhere, or runs a
// bare pod in the agents' namespace, is not an agent.
type AgentTrust struct {
	// Selector picks the agent pods; nil or empty disables agents.
	Selector labels.Selector
	// Namespace is the agents' namespace; empty disables agents.
	Namespace string
}

// Trusted reports whether p is a gpu-agent whose page may be believed.
func (a AgentTrust) Trusted(p *corev1.Pod) bool {
	if a.Selector == nil || a.Selector.Empty() || a.Namespace == "" || p.Namespace != a.Namespace {
		return false
	}
	if !a.Selector.Matches(labels.Set(p.Labels)) {
		return false
	}
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "DaemonSet" && (owner.APIVersion == "apps/v1" || owner.APIVersion == "extensions/v1beta1")
}

// AgentGate stands between the scraper and the store for gpu-agent pages: it
// passes on only the pods that run on the reporting agent's node, and only
// while the reporter is still a trusted agent. An agent can thus speak for
// its own node and nothing else.
type AgentGate struct {
	trust    AgentTrust
	pods     corelisters.PodLister
	next     scrape.AgentSink
	rejected *prometheus.CounterVec
}

var _ scrape.AgentSink = (*AgentGate)(nil)

// NewAgentGate returns a gate in front of next that reads pods from the
// informer cache, and registers its counter on reg (nil: not registered).
func NewAgentGate(trust AgentTrust, pods corelisters.PodLister, next scrape.AgentSink, reg prometheus.Registerer) *AgentGate {
	g := &AgentGate{
		trust: trust, pods: pods, next: next,
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "inference_metrics_adapter",
			Name:      "gpu_agent_rejected_pods_total",
			Help:      "Pods reported on gpu-agent pages that were ignored, by reason (untrusted_agent, unknown_pod, other_node).",
		}, []string{"reason"}),
	}
	for _, r := range []string{RejectUntrustedAgent, RejectUnknownPod, RejectOtherNode} {
		g.rejected.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(g.rejected)
	}
	return g
}

// RecordAgent implements scrape.AgentSink.
func (g *AgentGate) RecordAgent(agent types.NamespacedName, at time.Time, pods []agentpage.PodGPU, err error) {
	if err != nil {
		g.next.RecordAgent(agent, at, nil, err)
		return
	}
	ap, lerr := g.pods.Pods(agent.Namespace).Get(agent.Name)
	if lerr != nil || !g.trust.Trusted(ap) || ap.Spec.NodeName == "" {
		g.rejected.WithLabelValues(RejectUntrustedAgent).Add(float64(len(pods)))
		klog.V(2).InfoS("Ignoring the page of a pod that is not a trusted gpu-agent", "agent", klog.KRef(agent.Namespace, agent.Name), "pods", len(pods))
		return
	}
	kept := make([]agentpage.PodGPU, 0, len(pods))
	for _, p := range pods {
		pod, lerr := g.pods.Pods(p.Namespace).Get(p.Pod)
		switch {
		case lerr != nil:
			g.reject(agent, p, RejectUnknownPod, "")
		case pod.Spec.NodeName != ap.Spec.NodeName:
			g.reject(agent, p, RejectOtherNode, pod.Spec.NodeName)
		default:
			kept = append(kept, p)
		}
	}
	g.next.RecordAgent(agent, at, kept, nil)
}

func (g *AgentGate) reject(agent types.NamespacedName, p agentpage.PodGPU, reason, node string) {
	g.rejected.WithLabelValues(reason).Inc()
	klog.V(2).InfoS("Ignoring a gpu-agent's report about a pod", "agent", klog.KRef(agent.Namespace, agent.Name), "pod", pageRef(p.Namespace, p.Pod), "reason", reason, "podNode", node)
}

// pageRef is a pod named on a page for a log line: klog's reference when
// both names are printable ASCII, else the names quoted, cut short. A
// page's label values are the agent's text, and klog writes a value with
// a newline or an ESC as it is.
func pageRef(namespace, name string) any {
	for _, s := range []string{namespace, name} {
		for i := range len(s) {
			if s[i] <= ' ' || s[i] >= 0x7f {
				return fmt.Sprintf("%.64q", namespace+"/"+name)
			}
		}
	}
	return klog.KRef(namespace, name)
}
