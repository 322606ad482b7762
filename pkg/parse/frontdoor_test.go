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
		{"epp detected", readFixture(t, "gie-epp.prom"), Unknown, Page{Server: GIEEPP, Models: []Model{m(llama, sQ, 7.0), m("food-review", sQ, 1.0)}}},
		{"epp named", readFixture(t, "gie-epp.prom"), GIEEPP, Page{Server: GIEEPP, Models: []Model{m(llama, sQ, 7.0), m("food-review", sQ, 1.0)}}},
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
