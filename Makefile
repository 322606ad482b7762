# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# inference-metrics-adapter
SHELL := /bin/bash
GO ?= go
# go-nvml's header marks old NVML calls deprecated; its cgo prologue would print
# hundreds of warnings on every cold build of pkg/nodeagent/nvml.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN := bin
BINARIES := inference-metrics-adapter inference-sim gpu-agent loadgen capacity kubectl-inference
# Long steps print a line every 30 s while they run (see hack/with-progress.sh).
PROGRESS := ./hack/with-progress.sh
# Unit-test packages: everything except the end-to-end suite.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/e2e -e /test/helm -e /test/demo)

.PHONY: all build test unit e2e e2e-core e2e-scenarios tools bench fuzz verify lint lint-tools fmt vet tidy-check demo fleet gpu-check shootout soak soak-short clean manifests images images-local help

all: build ## The default: build

help: ## Show targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## Build all binaries into bin/
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do if [ -d cmd/$$b ]; then echo "go build ./cmd/$$b"; $(GO) build -trimpath -o $(BIN)/$$b ./cmd/$$b || exit 1; fi; done

unit: ## Unit tests (seconds once built; a cold build of the packages takes minutes), then every fuzz target for 3s
	$(PROGRESS) "unit tests" $(GO) test -count=1 $(UNIT_PKGS)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=3s

tools: ## Build the real control plane (etcd, kube-apiserver, kube-controller-manager) and helm, cached
	@$(PROGRESS) tools ./test/tools/build.sh >/dev/null

e2e: e2e-core e2e-scenarios ## End-to-end tests on a real control plane (builds the tools first, cached): e2e-core, then e2e-scenarios

e2e-core: ## The end-to-end suite and the chart tests (test/e2e, test/helm)
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(PROGRESS) e2e $(GO) test -p 1 -count=1 -timeout 40m -v ./test/e2e/... ./test/helm/... 2>&1 | tee e2e.log | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e:' ; \
	  rc=$${PIPESTATUS[0]}; if [ $$rc -ne 0 ] && [ -f e2e.log ]; then echo "e2e: what the failed tests said (all of it in e2e.log):"; ./hack/show-failures.sh e2e.log; fi; exit $$rc

e2e-scenarios: ## The demo and the shootout smoke, side by side (each on a control plane of its own; they mostly wait on the HPA)
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(PROGRESS) e2e-scenarios $(GO) test -p 2 -count=1 -timeout 20m -v ./test/demo/... ./test/shootout/... 2>&1 | tee e2e-scenarios.log | grep --line-buffered -E '^(--- |PASS|FAIL|ok|panic)|e2e-scenarios:' ; \
	  rc=$${PIPESTATUS[0]}; if [ $$rc -ne 0 ] && [ -f e2e-scenarios.log ]; then echo "e2e-scenarios: what the failed tests said (all of it in e2e-scenarios.log):"; ./hack/show-failures.sh e2e-scenarios.log; fi; exit $$rc

test: verify unit ## Everything CI runs: verify, unit tests, end-to-end tests, the short soak (beside the demo and shootout smoke, which mostly wait)
	@$(MAKE) --no-print-directory e2e-core
	@$(MAKE) --no-print-directory -j2 e2e-scenarios soak-short

bench: ## Benchmarks: parser vs expfmt vs floor, scrape vs bare GET, heap per 1000 targets
	$(GO) test -run='^$$' -bench=. -benchmem -count=3 ./pkg/adapter/parse ./pkg/adapter/scrape ./pkg/adapter/store ./pkg/adapter/provider

# Every fuzz target, as package:Target: the parsers of what a pod, a page or
# a file may hold (docs/parser.md#fuzzing). A finding is written to the
# package's testdata/fuzz/<Target>/ and fails the run.
FUZZ_TARGETS := ./pkg/adapter/parse:FuzzParse ./pkg/adapter/scrape:FuzzResponse ./pkg/adapter/scrape:FuzzResponseRoundTrip \
	./pkg/adapter/agentpage:FuzzParse ./pkg/adapter/dialect:FuzzDecode ./pkg/adapter/targets:FuzzAnnotations
# How long `make fuzz` runs each target, e.g. FUZZTIME=10m; FUZZFLAGS="-parallel=1" on a shared
# machine. Each new input that widens coverage is minimized for at most 5s: with go test's
# default (60s) the one worker minimizes instead of fuzzing for most of a short run.
FUZZTIME ?= 60s
FUZZFLAGS ?=
# A run that fails with only "context deadline exceeded" and writes no failing input is Go's
# own race at the -fuzztime boundary (go.dev/issue/75804, fixed in Go 1.27): it is run once more;
# any other failure, or the same one twice, fails.
fuzz: ## Fuzz every parser of untrusted input (FUZZ_TARGETS), each for FUZZTIME (60s)
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz: $$name in $$pkg for $(FUZZTIME)"; \
	  for try in 1 2; do \
	    if $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s $(FUZZFLAGS) $$pkg 2>&1 | tee $$log; \
	      test $${PIPESTATUS[0]} -eq 0; then break; fi; \
	    if [ $$try = 1 ] && grep -q 'context deadline exceeded' $$log && ! grep -q 'Failing input written' $$log; then \
	      echo "fuzz: $$name failed only at the -fuzztime deadline, no failing input (Go's race, go.dev/issue/75804): once more"; continue; fi; \
	    exit 1; \
	  done; done

fmt: ## gofmt the tree
	gofmt -w $$(git ls-files '*.go')

vet: ## go vet the module
	$(GO) vet ./...

tidy-check: ## Fail unless go.mod and go.sum (the module's and test/tools') are tidy
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@cd test/tools && $(GO) mod tidy -diff || { echo "test/tools/go.mod is not tidy: run (cd test/tools && go mod tidy)"; exit 1; }

verify: ## gofmt, licence headers, go vet, import rules, go mod tidy clean, generated files current, the dashboard and alerts lint, the release chart stamp, make lint
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^test/tools/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@./hack/verify-licence.sh
	$(PROGRESS) "go vet" $(GO) vet ./...
	@echo "verify: import rules (test/layout): the adapter binary reaches no tool or node-agent package, the gpu-agent none of the adapter's, no command imports another"
	@$(GO) test -count=1 -run '^TestVerify' ./test/layout/
	@$(MAKE) --no-print-directory tidy-check
	@echo "verify: manifests/ against the chart (the first run builds helm and the control plane, cached: minutes)"
	@if [ -x hack/verify-generated.sh ]; then ./hack/verify-generated.sh; fi
	@echo "verify: test/helm's TestVerify* tests: the chart's Grafana dashboard and PrometheusRule (promql/parser, rulefmt); the release workflow's chart stamp (hack/stamp-chart.sh)"
	@n=$$($(GO) test -list '^TestVerify' ./test/helm/ | grep -c '^TestVerify'); if [ "$$n" -eq 0 ]; then echo "verify: no TestVerify* test in test/helm: the chart checks would not run"; exit 1; fi
	@bin_dir=$$(./test/tools/build.sh | tail -n1) && IMA_E2E_BIN=$$bin_dir $(PROGRESS) "dashboard, alerts, chart stamp" $(GO) test -count=1 -run '^TestVerify' ./test/helm/
	@$(MAKE) --no-print-directory lint

lint-tools: ## Build golangci-lint and actionlint (versions pinned in hack/lint-tools.sh) once, cached outside the repository
	@$(PROGRESS) "lint tools" ./hack/lint-tools.sh >/dev/null

# actionlint's shellcheck and pyflakes passes are off: neither is a Go tool, so
# they would run in CI (where the runner has shellcheck) and not here.
lint: ## golangci-lint (.golangci.yml) on the module and actionlint on .github/workflows; fails on a finding
	@echo "lint: golangci-lint and actionlint (the first run builds them, cached outside the repository: 3.5 minutes on 2 quiet cores, 20 on busy ones)"
	@bin_dir=$$($(PROGRESS) "lint tools" ./hack/lint-tools.sh) && \
	  echo "lint: golangci-lint run ./... (a cold run type-checks every dependency: minutes)" && \
	  $(PROGRESS) golangci-lint $$bin_dir/golangci-lint run ./... && \
	  echo "lint: actionlint .github/workflows" && \
	  $$bin_dir/actionlint -shellcheck= -pyflakes=

demo: ## Run the demo: real control plane, simulated vLLM fleet, HPA on queue size
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(GO) run ./test/demo

gpu-check: ## Hardware check on a machine with an idle NVIDIA GPU: the NVML reader and the gpu-agent against the real driver (docs/gpu-agent.md)
	IMA_REAL_GPU=1 $(GO) test -count=1 -v ./test/gpuload/

# Flags for `make fleet`, e.g. FLEET_FLAGS="--pods 10000 --interval 5s" (see go run ./test/fleet --help).
FLEET_FLAGS ?=
fleet: ## Fleet benchmark: freshness, CPU per scrape, RSS, answer latency for N fake vLLM pods (not in make test)
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(GO) run ./test/fleet $(FLEET_FLAGS)

# Flags for `make shootout`, e.g. SHOOTOUT_FLAGS="--trace testdata/traces/azure-llm-2023-code.csv.gz --policies queue-3,gpu-80"
# (see go run ./test/shootout --help).
SHOOTOUT_FLAGS ?=
shootout: ## Scaling shootout: replay the Azure traces once per autoscaling policy; report in shootout-out/ (docs/shootout.md; not in make test, which runs a 3-minute smoke form)
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(GO) run ./test/shootout $(SHOOTOUT_FLAGS)

# How long `make soak` injects faults, e.g. SOAK_DURATION=2h (setup and teardown come on top).
SOAK_DURATION ?= 30m
soak: ## Soak with faults: churn, broken pages, kube-apiserver/etcd stops, adapter kills; prints the fault table (30m; not in make test)
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(GO) run ./test/soak --duration $(SOAK_DURATION)

soak-short: ## The soak's CI form, in make test: one cycle of every fault (about 4 minutes)
	@bin_dir=$$($(PROGRESS) tools ./test/tools/build.sh) && IMA_E2E_BIN=$$bin_dir $(GO) run ./test/soak --duration 2m30s

manifests: ## Render manifests/ from the Helm chart
	./hack/render-manifests.sh

images: ## Build the container images (needs docker or podman; run it in your CI)
	./hack/build-images.sh

images-local: ## Build the images from this repository alone with podman (no base image pulled), as TestImages does
	./hack/build-local-images.sh

clean: ## Remove bin/, the e2e logs and shootout-out/
	rm -rf $(BIN) e2e.log e2e-scenarios.log shootout-out
