// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package docs holds the tests of the repository's markdown: every page in
// docs/ is listed in docs/README.md, and every relative link in README.md,
// CONTRIBUTING.md and docs/ reaches a file, and a heading where it names one.
package docs
