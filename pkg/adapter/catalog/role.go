// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package catalog

// RoleSelectorLabel is the metric selector label that restricts a question
// to the pods of one role of a disaggregated deployment (role=prefill,
// role=decode): those whose role label (the adapter's --role-label) has
// that value. See docs/disaggregated.md.
const RoleSelectorLabel = "role"
