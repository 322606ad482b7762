# Copyright The inference-metrics-adapter Authors.
# SPDX-License-Identifier: Apache-2.0

# Sourced by the hack/ scripts: finds helm.
# helm: $IMA_E2E_BIN/helm when set, else `helm` on PATH when it is v3, else the
# one test/tools/build.sh builds (cached outside the repository).
find_helm() {
  if [[ -n "${IMA_E2E_BIN:-}" && -x "$IMA_E2E_BIN/helm" ]]; then
    echo "$IMA_E2E_BIN/helm"; return
  fi
  if command -v helm >/dev/null 2>&1 && helm version --short 2>/dev/null | grep -q '^v3\.'; then
    command -v helm; return
  fi
  local root bin
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  # The first build takes minutes: it says so, and prints progress, on stderr.
  bin="$("$root/hack/with-progress.sh" tools "$root/test/tools/build.sh" | tail -n1)"
  echo "$bin/helm"
}
