// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package parse

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParseFrontDoors: a front door's held requests are its queue, summed
// over the EPP's fairness, priority and pool series per model, whether the
// server is detected or named by the annotation; series a front door does
// not hold requests in (the pool's average queue) are not read.
func TestParseFrontDoors(t *testing.T) {
	const llama = "meta-llama/Llama-3.1-8B-Instruct"
	generic := []byte("# TYPE inference_front_door_pending_requests gauge\n" +
		"inference_front_door_pending_requests 3\n")
	llmd := []byte("inference_extension_flow_control_queue_size{fairness_id=\"a\",inference_pool=\"p\",model_name=\"m\",priority=\"0\",target_model_name=\"m\"} 4\n" +
		"llm_d_router_epp_flow_control_queue_size{fairness_id=\"a\",inference_pool=\"p\",model_name=\"m\",priority=\"0\",target_model_name=\"m\"} 4\n")
	tests := []struct {
		name string
		page []byte
		as   Server
		want Page
	}{
		{"epp detected", readFixture(t, "gie-epp.prom"), Unknown, Page{Server: GIEEPP, Models: []Model{m(llama, sQ, 7.0, sB, 0.0), m("food-review", sQ, 1.0)}}},
		{"epp named", readFixture(t, "gie-epp.prom"), GIEEPP, Page{Server: GIEEPP, Models: []Model{m(llama, sQ, 7.0, sB, 0.0), m("food-review", sQ, 1.0)}}},
		{"generic detected", generic, Unknown, Page{Server: FrontDoor, Models: []Model{m("", sQ, 3.0)}}},
		{"generic named", generic, FrontDoor, Page{Server: FrontDoor, Models: []Model{m("", sQ, 3.0)}}},
		// llm-d exports the renamed gauge next to the deprecated one: counted once.
		{"llm-d renamed gauge not added", llmd, Unknown, Page{Server: GIEEPP, Models: []Model{m("m", sQ, 4.0)}}},
		{"epp page read as vllm has nothing", readFixture(t, "gie-epp.prom"), VLLMV1, Page{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewParser().ParseAs(tc.page, tc.as)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFrontDoorServerNames: the front doors' annotation spellings resolve.
func TestFrontDoorServerNames(t *testing.T) {
	for name, want := range map[string]Server{"gie-epp": GIEEPP, "front-door": FrontDoor} {
		got, ok := ServerByName(name)
		if !ok || got != want || got.String() != name {
			t.Errorf("ServerByName(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
}

// TestParseEPPNames: the endpoint picker's held requests (queue), requests
// in flight (batch) and pool saturation (batch fill) under the current
// llm-d names and the deprecated Gateway API Inference Extension ones. A
// page with both is counted once and the current name wins, even where the
// two disagree; a deprecated name counts when the current one is absent; a
// refused current value is absent, not replaced by the deprecated one. The
// saturation is the pool's (no model label), may exceed 1, and is the
// stage="effective" series where the page splits it by stage.
func TestParseEPPNames(t *testing.T) {
	const qwen = "Qwen/Qwen3-32B"
	lbl := `{fairness_id="default",inference_pool="p",model_name="m",priority="0",target_model_name="m"}`
	tests := []struct {
		name string
		page string
		want Page
	}{
		{"llm-d page: current names, deprecated ones beside them", string(readFixture(t, "llm-d-epp.prom")),
			Page{Server: GIEEPP, Models: []Model{m("", sFill, 1.25), m(qwen, sQ, 9.0, sB, 17.0)}}},
		{"both names disagree: the current one wins",
			"inference_extension_flow_control_queue_size" + lbl + " 100\n" +
				"llm_d_epp_flow_control_queue_size" + lbl + " 4\n" +
				"inference_objective_running_requests{model_name=\"m\"} 50\n" +
				"llm_d_epp_request_running" + lbl + " 2\n" +
				"inference_extension_flow_control_pool_saturation{inference_pool=\"p\"} 0.9\n" +
				"llm_d_epp_flow_control_pool_saturation{inference_pool=\"p\"} 0.3\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sQ, 4.0, sB, 2.0), m("", sFill, 0.3)}}},
		{"the current name first on the page wins the same",
			"llm_d_epp_flow_control_queue_size" + lbl + " 4\n" +
				"inference_extension_flow_control_queue_size" + lbl + " 100\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sQ, 4.0)}}},
		{"deprecated names only (the Gateway API Inference Extension's EPP)",
			"inference_extension_flow_control_queue_size" + lbl + " 5\n" +
				"inference_objective_running_requests{model_name=\"m\"} 8\n" +
				"inference_extension_flow_control_pool_saturation{inference_pool=\"p\"} 0.5\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sQ, 5.0, sB, 8.0), m("", sFill, 0.5)}}},
		{"llm_d_router_epp names (llm-d-inference-scheduler) are current too",
			"inference_extension_flow_control_queue_size" + lbl + " 100\n" +
				"llm_d_router_epp_flow_control_queue_size" + lbl + " 4\n" +
				"llm_d_router_epp_running_requests{model_name=\"m\"} 3\n" +
				"llm_d_router_epp_flow_control_pool_saturation{inference_pool=\"p\"} 0.25\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sQ, 4.0, sB, 3.0), m("", sFill, 0.25)}}},
		{"a refused current value is absent, not the deprecated one",
			"llm_d_epp_flow_control_queue_size" + lbl + " -1\n" +
				"inference_extension_flow_control_queue_size" + lbl + " 100\n" +
				"llm_d_epp_request_running" + lbl + " 2\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sB, 2.0)}, Rejected: [NumRejects]uint32{RejectNegative: 1}}},
		{"per-stage saturation without an effective one is not the pool's",
			"llm_d_epp_flow_control_pool_saturation{inference_pool=\"p\",stage=\"prefill\"} 0.7\n" +
				"llm_d_epp_flow_control_pool_saturation{inference_pool=\"p\",stage=\"decode\"} 0.2\n" +
				"llm_d_epp_flow_control_queue_size" + lbl + " 1\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sQ, 1.0)}}},
		{"a saturation that is not a number is refused",
			"llm_d_epp_flow_control_pool_saturation{inference_pool=\"p\"} NaN\n" +
				"llm_d_epp_flow_control_queue_size" + lbl + " 1\n",
			Page{Server: GIEEPP, Models: []Model{m("m", sQ, 1.0)}, Rejected: [NumRejects]uint32{RejectNonFinite: 1}}},
	}
	for _, tc := range tests {
		for _, as := range []Server{Unknown, GIEEPP} {
			t.Run(tc.name+"/"+as.String(), func(t *testing.T) {
				got, err := NewParser().ParseAs([]byte(tc.page), as)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, *got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("page (-want +got):\n%s", diff)
				}
			})
		}
	}
}
