// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package helm

import (
	"testing"
)

// TestLeaderWorkerSetValues: leaderWorkerSet.enabled passes
// --leader-worker-sets and grants get, list and watch on leaderworkersets
// in the ClusterRole, or in each namespace's Role with adapter.namespaces;
// off by default, neither.
func TestLeaderWorkerSetValues(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name  string
		set   []string
		want  bool
		roles string // the kind holding the read rules
		count int    // how many of them
	}{
		{"off", nil, false, "ClusterRole", 1},
		{"on", []string{"leaderWorkerSet.enabled=true"}, true, "ClusterRole", 1},
		{"on, namespaced", []string{"leaderWorkerSet.enabled=true", "adapter.namespaces={a,b}"}, true, "Role", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var extra []string
			for _, s := range tc.set {
				extra = append(extra, "--set", s)
			}
			out, err := render(t, helm, "", extra...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, out)
			_, c := deployment(t, objs)
			if got := hasArg(c, "--leader-worker-sets"); got != tc.want {
				t.Errorf("--leader-worker-sets passed: %v, want %v", got, tc.want)
			}
			granted := 0
			for _, r := range byKind(objs, tc.roles) {
				for _, rule := range list(r["rules"]) {
					m, _ := rule.(map[string]any)
					groups, resources, verbs := list(m["apiGroups"]), list(m["resources"]), list(m["verbs"])
					if len(groups) == 1 && groups[0] == "leaderworkerset.x-k8s.io" && len(resources) == 1 && resources[0] == "leaderworkersets" {
						if len(verbs) != 3 || verbs[0] != "get" || verbs[1] != "list" || verbs[2] != "watch" {
							t.Errorf("%s %s grants %v on leaderworkersets, want get, list, watch", tc.roles, object(r).name(), verbs)
						}
						granted++
					}
				}
			}
			want := 0
			if tc.want {
				want = tc.count
			}
			if granted != want {
				t.Errorf("%d %ss grant leaderworkersets, want %d", granted, tc.roles, want)
			}
		})
	}
}
