// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/cli/clitest"
)

// runMainEnv makes the test binary run Main with its arguments instead of
// the tests, so that a test can start the simulator as a process.
const runMainEnv = "INFERENCE_SIM_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestProcessLogsJSON: the simulator as a process with
// --logging-format=json writes only JSON objects to stderr, from the start
// to its exit after SIGTERM, its Serving line carrying the address as a key.
// Was wrong: it had klog's text output only, unlike the adapter and the
// gpu-agent, though it runs as a pod.
func TestProcessLogsJSON(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--logging-format=json", "--listen=127.0.0.1:0", "--model=m")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	addr := ""
	clitest.CheckJSONLogs(t, cmd, func(m map[string]any) bool {
		if m["msg"] == "Serving" {
			addr, _ = m["address"].(string)
		}
		return addr != ""
	}, func() {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/health answered %d, want 200", resp.StatusCode)
		}
	})
}

// TestBadLoggingFlags: a bad logging flag is a usage error (exit status 2),
// listed with the simulator's other bad flags.
func TestBadLoggingFlags(t *testing.T) {
	const listen = "--listen=127.0.0.1:1"
	clitest.CheckExits(t, Main, []clitest.ExitCase{
		{Name: "unknown format", Args: []string{"--logging-format=xml", listen}, Code: 2, Stderr: []string{"Unsupported log format"}},
		{Name: "vmodule with json", Args: []string{"--logging-format=json", "--vmodule=server=2", listen}, Code: 2, Stderr: []string{"Only supported for text log format"}},
		{Name: "with another bad flag", Args: []string{"--logging-format=xml", "--max-num-seqs=0", listen}, Code: 2, Stderr: []string{"Unsupported log format", "max-num-seqs must be at least 1"}},
	})
}
