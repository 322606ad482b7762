// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/test/e2e/framework"
)

// imageTag is the tag the test builds its images with.
const imageTag = "e2e"

// containerDir is where a container sees the test's files (certificates,
// kubeconfig, server config), mounted read-only.
const containerDir = "/e2e"

// podmanRun is how the test runs a container: runc (the sandbox refuses
// crun), ulimits the sandbox allows, the host's network, a read-only root
// with a writable /tmp (as the chart mounts an emptyDir there), and no pull:
// the image must be the one just built.
func podmanRun(name string, extra ...string) []string {
	args := []string{"--runtime", "runc", "run", "--rm", "--pull=never", "--name", name,
		"--network", "host", "--read-only", "--tmpfs", "/tmp",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}
	return append(args, extra...)
}

// buildImages runs hack/build-local-images.sh and returns each image's
// name by binary, logging the sizes.
func buildImages(t *testing.T, podman string) map[string]string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-local-images.sh"))
	cmd.Env = append(os.Environ(), "CONTAINER_TOOL="+podman, "TAG="+imageTag, "IMAGE_WORKDIR="+t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/build-local-images.sh: %v\n%s", err, errOut.String())
	}
	images := map[string]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		image, size, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("build-local-images printed %q, want IMAGE SIZE", sc.Text())
		}
		name := strings.TrimSuffix(filepath.Base(image), ":"+imageTag)
		n, _ := strconv.ParseFloat(size, 64)
		t.Logf("image %s: %.1f MB", image, n/1e6)
		images[name] = image
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, image := range images {
			if out, err := exec.CommandContext(ctx, podman, "rmi", "--force", image).CombinedOutput(); err != nil {
				t.Logf("remove image %s: %v\n%s", image, err, out)
			}
		}
	})
	for _, want := range []string{"inference-metrics-adapter", "gpu-agent", "inference-sim"} {
		if images[want] == "" {
			t.Fatalf("no %s image built; the script printed:\n%s", want, out.String())
		}
	}
	return images
}

// startContainer runs podman with args as a process of the test, stopped by
// its PID (podman passes SIGTERM on to the container) at cleanup.
func startContainer(t *testing.T, podman, logDir, name string, args []string) *framework.Process {
	t.Helper()
	removeContainerAtCleanup(t, podman, name)
	p, err := framework.StartProcess(name, logDir, podman, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(15 * time.Second); err != nil {
			t.Errorf("stop container %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("container %s log:\n%s", name, p.Tail(30))
		}
	})
	return p
}

// removeContainerAtCleanup removes the container by name at cleanup, in
// case podman itself was killed before it could.
func removeContainerAtCleanup(t *testing.T, podman, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = exec.CommandContext(ctx, podman, "rm", "--force", "--time", "0", name).Run()
	})
}

// TestImages builds the images from the repository alone
// (hack/build-local-images.sh) and runs them with podman: the adapter's
// image with the chart's arguments, as the chart's ServiceAccount, behind
// the chart's APIServices on a control plane of its own, answering the
// HPA's questions; the gpu-agent's image serving its page with a fake NVML
// backend. It skips, saying so, where podman is not installed (.ci/run
// installs it).
func TestImages(t *testing.T) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed (Debian: apt-get install podman runc; .ci/run installs it): the images are neither built nor run")
	}
	t.Parallel()
	images := buildImages(t, podman)

	t.Run("no shell, not root", func(t *testing.T) {
		for name, image := range images {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, err := exec.CommandContext(ctx, podman, podmanRun("ima-e2e-shell-"+name, "--entrypoint", "/bin/sh", image, "-c", "true")...).CombinedOutput()
			cancel()
			if err == nil {
				t.Errorf("%s: /bin/sh ran in the image; want an image without a shell:\n%s", name, out)
			}
			ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
			user, err := exec.CommandContext(ctx, podman, "image", "inspect", "--format", "{{.Config.User}}", image).Output()
			cancel()
			if err != nil {
				t.Fatalf("inspect %s: %v", image, err)
			}
			want := "65532:65532"
			if name == "gpu-agent" {
				want = "0:0" // the kubelet's pod-resources socket is root's
			}
			if got := strings.TrimSpace(string(user)); got != want {
				t.Errorf("%s runs as %q, want %q", name, got, want)
			}
		}
	})

	t.Run("gpu-agent", func(t *testing.T) {
		port, err := framework.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		startContainer(t, podman, t.TempDir(), "ima-e2e-gpu-agent", podmanRun("ima-e2e-gpu-agent", images["gpu-agent"],
			"--listen-address=127.0.0.1:"+strconv.Itoa(port), "--testing-fake-nvml=dgxa100", "--interval=1s",
			"--pod-resources-socket=/nonexistent/kubelet.sock"))
		want := `backend="testing-fake-nvml/dgxa100"`
		var last string
		if err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			body, err := framework.GetPage(ctx, nil, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics")
			last = string(body)
			if err != nil {
				last = err.Error()
			}
			return err == nil && strings.Contains(string(body), want), nil
		}); err != nil {
			t.Fatalf("the gpu-agent container's page never carried %s in 60s; last: %.500s", want, last)
		}
	})

	t.Run("adapter behind the chart's APIServices", func(t *testing.T) {
		h := startHelmEnv(t)
		name := "ima-e2e-adapter"
		removeContainerAtCleanup(t, podman, name)
		// in.cleanup uninstalls the release while the container serves,
		// then stops it (in.adapter) by its PID.
		in := h.install(t, "tls-helm")
		var args []string
		for _, a := range in.adapterArgs(t, name, in.port) {
			args = append(args, strings.ReplaceAll(a, h.dir, containerDir))
		}
		// The user 65532 reads the files the test wrote, as the pod reads
		// its mounted Secret and ConfigMap.
		if err := filepath.WalkDir(h.dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			return os.Chmod(path, mode)
		}); err != nil {
			t.Fatal(err)
		}
		run := podmanRun(name, "--volume", h.dir+":"+containerDir+":ro", images["inference-metrics-adapter"])
		if in.adapter, err = framework.StartProcess(name, h.cp.LogDir, podman, append(run, args...), nil); err != nil {
			t.Fatal(err)
		}
		if notYet := in.waitAvailable(t, 90*time.Second); len(notYet) > 0 {
			t.Fatalf("APIServices not Available with the adapter's image: %v\n%s", notYet, in.adapter.Tail(30))
		}
		in.checkProbes(t)
		in.checkScenario(t)
	})
}
