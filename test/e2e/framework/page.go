// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// MaxPage bounds a page GetPage and MetricFamilies read.
const MaxPage = 16 << 20

// GetPage GETs url with c (http.DefaultClient when nil) and returns the
// body. A status other than 200 OK, or a body longer than MaxPage, is an
// error. ctx bounds the request.
func GetPage(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPage+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: read: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.512s", url, resp.Status, body)
	}
	if len(body) > MaxPage {
		return nil, fmt.Errorf("GET %s: the page is longer than %d bytes", url, MaxPage)
	}
	return body, nil
}

// MetricFamilies GETs a Prometheus text page (a model server's or an
// agent's /metrics) and parses it with the Prometheus text parser,
// independently of the adapter's own parser.
func MetricFamilies(ctx context.Context, c *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	body, err := GetPage(ctx, c, url)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return families, nil
}
