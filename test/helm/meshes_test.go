// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// meshExamples is where docs/meshes.md's recipes live: *-values.yaml are the
// chart's values, the other files the mesh's own objects.
const meshExamples = "../../manifests/examples/meshes"

// TestMeshRecipeValues renders the chart with each recipe's values file and
// checks that the pod gets the annotations, labels, volumes and scrape flags
// the recipe relies on; and that every values file in the directory is one
// the table knows, so a new recipe cannot go unrendered.
func TestMeshRecipeValues(t *testing.T) {
	helm := helmBinary(t)
	istioCerts := "/etc/istio-output-certs"
	for _, tc := range []struct {
		file        string
		labels      map[string]string
		annotations map[string]string
		args        []string // the --scrape-* TLS flags, in order
		volumes     []string // extra volumes (not the chart's own)
		mounts      map[string]string
	}{
		{file: "istio-in-mesh-values.yaml",
			labels: map[string]string{"sidecar.istio.io/inject": "true"},
			annotations: map[string]string{
				"traffic.sidecar.istio.io/excludeInboundPorts": "6443",
				"proxy.istio.io/config":                        `{"holdApplicationUntilProxyStarts": true}`,
			}},
		{file: "linkerd-in-mesh-values.yaml",
			annotations: map[string]string{"linkerd.io/inject": "enabled", "config.linkerd.io/skip-inbound-ports": "6443"}},
		{file: "istio-output-certs-values.yaml",
			labels: map[string]string{"sidecar.istio.io/inject": "true"},
			annotations: map[string]string{
				"proxy.istio.io/config":                            `{"holdApplicationUntilProxyStarts": true, "proxyMetadata": {"OUTPUT_CERTS": "/etc/istio-output-certs"}}`,
				"sidecar.istio.io/userVolumeMount":                 `[{"name": "istio-certs", "mountPath": "/etc/istio-output-certs"}]`,
				"traffic.sidecar.istio.io/includeInboundPorts":     "",
				"traffic.sidecar.istio.io/includeOutboundIPRanges": "",
			},
			args: []string{"--scrape-insecure-skip-verify",
				"--scrape-client-cert-file=" + istioCerts + "/cert-chain.pem",
				"--scrape-client-key-file=" + istioCerts + "/key.pem"},
			volumes: []string{"istio-certs"},
			mounts:  map[string]string{"istio-certs": istioCerts}},
		{file: "cert-manager-values.yaml",
			args: []string{"--scrape-ca-file=/etc/inference-metrics-adapter/scrape-ca/ca.crt",
				"--scrape-client-cert-file=/etc/inference-metrics-adapter/scrape-client/tls.crt",
				"--scrape-client-key-file=/etc/inference-metrics-adapter/scrape-client/tls.key"},
			mounts: map[string]string{"scrape-ca": "/etc/inference-metrics-adapter/scrape-ca", "scrape-client": "/etc/inference-metrics-adapter/scrape-client"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out, err := render(t, helm, "", "-f", filepath.Join(meshExamples, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			pod, c := deployment(t, objs)
			var tmpl map[string]any
			for _, o := range byKind(objs, "Deployment") {
				tmpl, _ = get(o, "spec", "template").(map[string]any)
			}
			for k, v := range tc.labels {
				if got, ok := get(tmpl, "metadata", "labels", k).(string); !ok || got != v {
					t.Errorf("pod label %s = %q (set %v), want %q", k, got, ok, v)
				}
			}
			for k, v := range tc.annotations {
				if got, ok := get(tmpl, "metadata", "annotations", k).(string); !ok || got != v {
					t.Errorf("pod annotation %s = %q (set %v), want %q", k, got, ok, v)
				}
			}
			var args []string
			for _, a := range list(c["args"]) {
				if s, _ := a.(string); strings.HasPrefix(s, "--scrape-ca") || strings.HasPrefix(s, "--scrape-insecure") || strings.HasPrefix(s, "--scrape-client") || strings.HasPrefix(s, "--scrape-bearer") {
					args = append(args, s)
				}
			}
			if !slices.Equal(args, tc.args) {
				t.Errorf("scrape TLS args %q, want %q", args, tc.args)
			}
			var vols []string
			for _, v := range list(pod["volumes"]) {
				switch name, _ := v.(map[string]any)["name"].(string); name {
				case "tls", "tmp", "server-config", "keda-client-ca", "scrape-ca", "scrape-token", "scrape-client":
				default:
					vols = append(vols, name)
				}
			}
			if !slices.Equal(vols, tc.volumes) {
				t.Errorf("extra volumes %q, want %q", vols, tc.volumes)
			}
			mounts := map[string]string{}
			for _, m := range list(c["volumeMounts"]) {
				mm, _ := m.(map[string]any)
				name, _ := mm["name"].(string)
				path, _ := mm["mountPath"].(string)
				mounts[name] = path
			}
			for name, path := range tc.mounts {
				if mounts[name] != path {
					t.Errorf("mount %s at %q, want %q (mounts %v)", name, mounts[name], path, mounts)
				}
			}
			// A file the adapter is told to read lies under a mount.
			for _, a := range args {
				_, file, ok := strings.Cut(a, "=")
				if !ok {
					continue
				}
				under := false
				for _, path := range mounts {
					under = under || strings.HasPrefix(file, path+"/")
				}
				if !under {
					t.Errorf("%s: %s is under no mount of the container (%v)", a, file, mounts)
				}
			}
		})
	}
	t.Run("every values file is rendered here", func(t *testing.T) {
		files, err := filepath.Glob(filepath.Join(meshExamples, "*-values.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s/*-values.yaml (err %v)", meshExamples, err)
		}
		known := []string{"istio-in-mesh-values.yaml", "linkerd-in-mesh-values.yaml", "istio-output-certs-values.yaml", "cert-manager-values.yaml"}
		for _, f := range files {
			if !slices.Contains(known, filepath.Base(f)) {
				t.Errorf("%s is not rendered by TestMeshRecipeValues: add it to the table", f)
			}
		}
	})
}

// TestScrapeTLSFiles: scrapeTLS.files passes paths the operator mounted, and
// refuses the combinations the flags cannot take.
func TestScrapeTLSFiles(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name    string
		set     []string
		wantArg []string
		wantErr string
	}{
		{name: "CA and client certificate", set: []string{"scrapeTLS.files.ca=/certs/ca.pem", "scrapeTLS.files.clientCert=/certs/c.pem", "scrapeTLS.files.clientKey=/certs/k.pem"},
			wantArg: []string{"--scrape-ca-file=/certs/ca.pem", "--scrape-client-cert-file=/certs/c.pem", "--scrape-client-key-file=/certs/k.pem"}},
		{name: "certificate without a key", set: []string{"scrapeTLS.files.clientCert=/certs/c.pem"}, wantErr: "together"},
		{name: "key without a certificate", set: []string{"scrapeTLS.files.clientKey=/certs/k.pem"}, wantErr: "together"},
		{name: "two CAs", set: []string{"scrapeTLS.files.ca=/certs/ca.pem", "scrapeTLS.caSecret=x"}, wantErr: "files.ca cannot go with"},
		{name: "CA and insecure", set: []string{"scrapeTLS.files.ca=/certs/ca.pem", "scrapeTLS.insecureSkipVerify=true"}, wantErr: "files.ca cannot go with"},
		{name: "two client certificates", set: []string{"scrapeTLS.files.clientCert=/c", "scrapeTLS.files.clientKey=/k", "scrapeTLS.clientCertSecret=x"}, wantErr: "not both"},
		{name: "volume without a name", set: []string{"extraVolumes[0].emptyDir.medium=Memory"}, wantErr: "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			for _, s := range tc.set {
				extra = append(extra, "--set", s)
			}
			out, err := render(t, helm, "", extra...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("render: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, c := deployment(t, decode(t, out))
			for _, a := range tc.wantArg {
				if !hasArg(c, a) {
					t.Errorf("no %s in %v", a, c["args"])
				}
			}
		})
	}
}

// TestMeshRecipeObjects: each mesh object a recipe shows, in the example
// files and in docs/meshes.md's yaml blocks, is valid YAML with an apiVersion,
// a kind and a name, of a kind the recipes mean to use; and each of
// docs/meshes.md's yaml blocks is an example file (values) or one of their
// objects.
func TestMeshRecipeObjects(t *testing.T) {
	kinds := map[string]string{
		"Service":               "v1",
		"DestinationRule":       "networking.istio.io/v1",
		"PeerAuthentication":    "security.istio.io/v1",
		"CiliumNetworkPolicy":   "cilium.io/v2",
		"Server":                "policy.linkerd.io/v1beta3",
		"NetworkAuthentication": "policy.linkerd.io/v1alpha1",
		"AuthorizationPolicy":   "policy.linkerd.io/v1alpha1",
		"Certificate":           "cert-manager.io/v1",
		"Bundle":                "trust.cert-manager.io/v1alpha1",
	}
	check := func(t *testing.T, where string, data []byte) int {
		t.Helper()
		n := 0
		r := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			var m map[string]any
			if err := yaml.UnmarshalStrict(doc, &m); err != nil {
				t.Errorf("%s: not YAML: %v", where, err)
				continue
			}
			kind, _ := m["kind"].(string)
			api, _ := m["apiVersion"].(string)
			if want, ok := kinds[kind]; !ok || api != want {
				t.Errorf("%s: kind %q apiVersion %q, want one of %v", where, kind, api, kinds)
			}
			if str(m, "metadata", "name") == "" {
				t.Errorf("%s: %s without metadata.name", where, kind)
			}
			n++
		}
		return n
	}
	files, err := filepath.Glob(filepath.Join(meshExamples, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s/*.yaml (err %v)", meshExamples, err)
	}
	objects := 0
	var examples []map[string]any // every values file and every object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		examples = append(examples, docs...)
		if strings.HasSuffix(f, "-values.yaml") {
			continue
		}
		if n := check(t, f, data); n == 0 {
			t.Errorf("%s holds no object", f)
		} else {
			objects += n
		}
	}
	if objects < len(kinds) {
		t.Errorf("%d objects in the example files, want one of each of %d kinds at least", objects, len(kinds))
	}

	doc, err := os.ReadFile("../../docs/meshes.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/meshes.md has no yaml block")
	}
	for i, b := range blocks {
		where := fmt.Sprintf("docs/meshes.md yaml block %d", i+1)
		var m map[string]any
		if err := yaml.Unmarshal(b[1], &m); err != nil {
			t.Errorf("%s: not YAML: %v", where, err)
			continue
		}
		if _, ok := m["kind"]; ok {
			check(t, where, b[1])
		}
		// Each block is a file of the examples (a values file, rendered by
		// TestMeshRecipeValues) or one of their objects, so the doc shows what
		// the tests check.
		if !slices.ContainsFunc(examples, func(e map[string]any) bool { return reflect.DeepEqual(e, m) }) {
			t.Errorf("%s is no example file's content nor one of their objects:\n%s", where, b[1])
		}
	}
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// splitYAML decodes each document of data.
func splitYAML(data []byte) ([]map[string]any, error) {
	var out []map[string]any
	r := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}
