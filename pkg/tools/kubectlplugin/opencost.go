// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Pricing says where the cost figures of `top` come from; the zero value
// means none.
type Pricing struct {
	// GPUHourPrice is the price of one GPU for one hour: a Deployment costs
	// it times its allocated GPUs.
	GPUHourPrice float64
	// OpenCost, when set, is where each Deployment's measured cost comes
	// from instead (its allocation over Window).
	OpenCost *OpenCost
}

// IsSet reports whether p gives cost figures.
func (p Pricing) IsSet() bool { return p.GPUHourPrice > 0 || p.OpenCost != nil }

// maxOpenCostBody bounds an /allocation answer.
const maxOpenCostBody = 32 << 20

// OpenCost reads what Deployments cost from OpenCost's allocation API
// (GET <url>/allocation?window=W&aggregate=namespace,controllerKind,controller&accumulate=true).
// Of each allocation it uses properties.namespace, properties.controllerKind
// and properties.controller to find the Deployment, and totalCost divided by
// minutes (its running time in the window) as the cost per second.
type OpenCost struct {
	URL    string // the API's base URL, e.g. http://opencost.opencost:9003
	Window string // OpenCost's window, e.g. 1h
	Client *http.Client
}

// allocationResponse is the shape of OpenCost's /allocation answer: a list
// of allocation sets (one with accumulate=true), each keyed by the
// aggregate's name.
type allocationResponse struct {
	Code    int                              `json:"code"`
	Message string                           `json:"message"`
	Data    []map[string]*openCostAllocation `json:"data"`
}

type openCostAllocation struct {
	Properties struct {
		Namespace      string `json:"namespace"`
		ControllerKind string `json:"controllerKind"`
		Controller     string `json:"controller"`
	} `json:"properties"`
	Minutes   float64 `json:"minutes"`
	TotalCost float64 `json:"totalCost"`
}

// DeploymentCosts returns, by Deployment name in namespace, what each cost
// per second over the window. A Deployment OpenCost has no allocation (or
// no running time) for is absent, never 0.
func (o *OpenCost) DeploymentCosts(ctx context.Context, namespace string) (map[string]float64, error) {
	u, err := url.Parse(strings.TrimSuffix(o.URL, "/") + "/allocation")
	if err != nil {
		return nil, fmt.Errorf("OpenCost URL %q: %w", o.URL, err)
	}
	q := url.Values{}
	q.Set("window", o.Window)
	q.Set("aggregate", "namespace,controllerKind,controller")
	q.Set("accumulate", "true")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("OpenCost request: %w", err)
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("OpenCost %s: %w", u.Redacted(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOpenCostBody+1))
	if err != nil {
		return nil, fmt.Errorf("OpenCost %s: reading the answer: %w", u.Redacted(), err)
	}
	if len(body) > maxOpenCostBody {
		return nil, fmt.Errorf("OpenCost %s: the answer is over %d MiB", u.Redacted(), maxOpenCostBody>>20)
	}
	if resp.StatusCode != http.StatusOK {
		// The reason phrase is the server's text, as the body is: quoted.
		reason := strings.TrimPrefix(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)), " ")
		return nil, fmt.Errorf("OpenCost %s: HTTP %d %.64q: %.200q", u.Redacted(), resp.StatusCode, reason, body)
	}
	var ar allocationResponse
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("OpenCost %s: not an allocation answer: %w", u.Redacted(), err)
	}
	if ar.Code != 0 && ar.Code != http.StatusOK {
		return nil, fmt.Errorf("OpenCost %s: code %d: %.200q", u.Redacted(), ar.Code, ar.Message)
	}
	type sum struct{ cost, minutes float64 }
	sums := map[string]sum{}
	for _, set := range ar.Data { // one set with accumulate=true; summed if more
		for _, a := range set {
			if a == nil || a.Properties.Namespace != namespace || !strings.EqualFold(a.Properties.ControllerKind, "deployment") || a.Properties.Controller == "" {
				continue
			}
			s := sums[a.Properties.Controller]
			s.cost += a.TotalCost
			s.minutes += a.Minutes
			sums[a.Properties.Controller] = s
		}
	}
	out := map[string]float64{}
	for name, s := range sums {
		if s.minutes > 0 && s.cost >= 0 { // no running time: no rate
			out[name] = s.cost / (s.minutes * 60)
		}
	}
	return out, nil
}
