// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kedascaler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
)

// Identity is a caller of the scaler's port: the subject of its verified
// client certificate, read as kube-apiserver reads one (CN the user, O the
// groups).
type Identity struct {
	User   string
	Groups []string
}

// Access is the authorization rule of the scaler's port. KEDA v2.21's
// external scaler client sends no credential but a TLS client certificate
// (tlsClientCert and tlsClientKey), so a caller's identity is its verified
// client certificate's subject. A caller may ask about a namespace when a
// Grant names it (or one of its groups) with that namespace, or when
// Reviewer allows it the same question on custom.metrics.k8s.io. The zero
// Access refuses every call.
type Access struct {
	// Grants are the namespaces identities may ask about.
	Grants []Grant
	// Reviewer, when set, decides for an identity no grant allows: the
	// question is authorized as a get of the same metric on
	// custom.metrics.k8s.io in the namespace (the API server's delegated
	// authorizer, a SubjectAccessReview with its cache of verdicts).
	Reviewer Reviewer
	// AllowUnauthenticated lets callers without a client certificate ask
	// about any namespace: the port's behaviour before it had a rule, for
	// a port that only KEDA can reach.
	AllowUnauthenticated bool
}

// Reviewer decides whether a user may ask a question of the custom metrics
// API (the API server's authorizer.Authorizer, whose delegated
// SubjectAccessReviews are cached, implements it).
type Reviewer interface {
	Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)
}

// Grant allows a user or a group the namespaces it lists.
type Grant struct {
	Group      bool   // Name is a group (the certificate's O), not a user (its CN)
	Name       string // the user or group
	Namespaces []string
}

// AllNamespaces in a Grant's namespaces stands for every namespace.
const AllNamespaces = "*"

// ParseGrant reads a grant written user:NAME=NS[,NS...] or
// group:NAME=NS[,NS...], where NS "*" is every namespace, e.g.
// "user:keda-operator=*" or "group:team-a-scalers=team-a,team-a-dev".
func ParseGrant(s string) (Grant, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || (kind != "user" && kind != "group") {
		return Grant{}, fmt.Errorf("grant %.64q: want user:NAME=NAMESPACES or group:NAME=NAMESPACES", s)
	}
	i := strings.LastIndex(rest, "=")
	if i <= 0 {
		return Grant{}, fmt.Errorf("grant %.64q: want %s:NAME=NAMESPACES, with a name and namespaces (\"*\" for every namespace)", s, kind)
	}
	g := Grant{Group: kind == "group", Name: rest[:i]}
	for _, ns := range strings.Split(rest[i+1:], ",") {
		ns = strings.TrimSpace(ns)
		if ns != AllNamespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return Grant{}, fmt.Errorf("grant %.64q: namespace %.64q is not a namespace name or \"*\": %s", s, ns, strings.Join(errs, "; "))
			}
		}
		g.Namespaces = append(g.Namespaces, ns)
	}
	return g, nil
}

// String is the grant as ParseGrant reads it.
func (g Grant) String() string {
	kind := "user"
	if g.Group {
		kind = "group"
	}
	return kind + ":" + g.Name + "=" + strings.Join(g.Namespaces, ",")
}

// grants reports whether a grant allows who namespace.
func (a Access) grants(who Identity, namespace string) bool {
	for _, g := range a.Grants {
		if (g.Group && slices.Contains(who.Groups, g.Name)) || (!g.Group && g.Name == who.User) {
			if slices.Contains(g.Namespaces, AllNamespaces) || slices.Contains(g.Namespaces, namespace) {
				return true
			}
		}
	}
	return false
}

// identity returns the caller's identity: the subject of the client
// certificate the TLS handshake verified. A caller without one (plaintext,
// no certificate asked for, or a certificate without a CN) has none.
func identity(ctx context.Context) (Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	subject := info.State.VerifiedChains[0][0].Subject
	if subject.CommonName == "" {
		return Identity{}, false
	}
	return Identity{User: subject.CommonName, Groups: slices.Clone(subject.Organization)}, true
}

// admit parses ref and applies the port's rule to the call: a caller
// without an identity is refused first (Unauthenticated) unless Access
// allows such callers, then ref is validated (InvalidArgument), then the
// caller must be allowed ref's namespace (PermissionDenied). Nothing is
// read, scraped or kept as demand for a refused call.
func (s *Scaler) admit(ctx context.Context, ref *pb.ScaledObjectRef) (query, error) {
	a := s.cfg.Access
	who, ok := identity(ctx)
	if !ok && !a.AllowUnauthenticated {
		return query{}, status.Error(codes.Unauthenticated, "the KEDA scaler's port answers only callers with a client certificate (KEDA's tlsClientCert and tlsClientKey, from a ClusterTriggerAuthentication)")
	}
	q, err := parseRef(ref)
	if err != nil || !ok {
		return q, err
	}
	if a.grants(who, q.namespace) {
		return q, nil
	}
	if a.Reviewer != nil {
		decision, reason, err := a.Reviewer.Authorize(ctx, q.attributes(who))
		if decision == authorizer.DecisionAllow {
			return q, nil
		}
		if err != nil {
			klog.ErrorS(err, "Authorizing a KEDA scaler call", "user", who.User, "groups", who.Groups, "namespace", q.namespace)
			return q, status.Errorf(codes.Unavailable, "authorizing %.64q for namespace %.64q failed; try again", who.User, q.namespace)
		}
		klog.V(2).InfoS("KEDA scaler call refused", "user", who.User, "groups", who.Groups, "namespace", q.namespace, "metric", q.metric, "reason", reason)
	}
	return q, status.Errorf(codes.PermissionDenied, "%.64q may not ask about namespace %.64q on the KEDA scaler's port", who.User, q.namespace)
}

// attributes is q as a question to custom.metrics.k8s.io, as the API port
// authorizes it: a get of the metric (a subresource) of the workload, or of
// pods "*" for a pod selector, in q's namespace. The user is authenticated
// as on the API port (system:authenticated).
func (q query) attributes(who Identity) authorizer.Attributes {
	resource, name := "pods", "*"
	switch q.kind {
	case kindDeployment:
		resource, name = "deployments.apps", q.name
	case kindStatefulSet:
		resource, name = "statefulsets.apps", q.name
	case kindService:
		resource, name = "services", q.name
	}
	groups := slices.Clone(who.Groups)
	if !slices.Contains(groups, user.AllAuthenticated) {
		groups = append(groups, user.AllAuthenticated)
	}
	return authorizer.AttributesRecord{
		User:            &user.DefaultInfo{Name: who.User, Groups: groups},
		Verb:            "get",
		Namespace:       q.namespace,
		APIGroup:        "custom.metrics.k8s.io",
		APIVersion:      "v1beta2",
		Resource:        resource,
		Subresource:     q.metric,
		Name:            name,
		ResourceRequest: true,
		Path:            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + q.namespace + "/" + resource + "/" + name + "/" + q.metric,
	}
}
