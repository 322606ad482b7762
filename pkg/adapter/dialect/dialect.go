// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dialect owns the override file named by --server-config: a
// small YAML table that maps a custom model server's series to the serving
// signals (queue, batch, KV cache, batch fill). It reads the file once,
// checks it strictly (unknown or repeated keys, missing series, clashing
// names and bad scales are errors that name the file and line) and turns it
// into the parse.Servers the scrapers' parsers use. The format is described
// in docs/servers.md.
package dialect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inference-metrics-adapter/inference-metrics-adapter/pkg/adapter/parse"
)

// Load reads and checks the override file at path and returns the built-in
// servers plus the file's custom ones. Every problem found is reported, each
// as "path:line: what".
func Load(path string) (*parse.Servers, error) {
	servers, _, err := LoadFile(path)
	return servers, err
}

// LoadFile is Load that also returns how each custom server's pods are
// scraped (its scheme and auth keys), by server name; a server without
// either key is not in the map.
func LoadFile(path string) (*parse.Servers, map[string]Scrape, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading server config: %w", err)
	}
	f, err := DecodeFile(path, data)
	if err != nil {
		return nil, nil, err
	}
	servers, err := parse.NewServers(f.Servers)
	if err != nil { // Decode checks the same rules, so this is not expected
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return servers, f.Scrape, nil
}

// Scrape is how a server's pods are scraped when their own annotations
// (prometheus.io/scheme, inference-metrics-adapter/scrape-auth) do not
// say: Scheme "http" or "https", Auth "none" or "bearer" ("" when the key
// is absent).
type Scrape struct {
	Scheme string
	Auth   string
}

// File is the override file's content.
type File struct {
	// Servers are the custom servers, in the file's order.
	Servers []parse.CustomServer
	// Scrape holds the scheme and auth of the servers that set either, by name.
	Scrape map[string]Scrape
}

// Keys of the file, in the order the docs list them.
var (
	topKeys    = []string{"servers"}
	serverKeys = []string{"name", "modelLabel", "scheme", "auth", "queue", "batch", "kvCache", "batchFill"}
	seriesKeys = []string{"series", "labels", "scale"}
)

// Decode parses and checks the override file's content; file names it in
// errors. It returns the custom servers in the file's order.
func Decode(file string, data []byte) ([]parse.CustomServer, error) {
	f, err := DecodeFile(file, data)
	return f.Servers, err
}

// DecodeFile is Decode that also returns the servers' scrape settings.
func DecodeFile(file string, data []byte) (File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return File{}, fmt.Errorf("%s: the file is empty; want a top-level \"servers:\" list", file)
		}
		return File{}, fmt.Errorf("%s: %w", file, err)
	}
	d := &decoder{file: file}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		d.errorf(&extra, "a second YAML document; the file holds one")
	case !errors.Is(err, io.EOF):
		return File{}, fmt.Errorf("%s: %w", file, err)
	}
	out := d.top(&doc)
	if len(d.errs) > 0 {
		return File{}, errors.Join(d.errs...)
	}
	return File{Servers: out, Scrape: d.scrape}, nil
}

// decoder walks the YAML tree and collects every problem with its line.
type decoder struct {
	file   string
	errs   []error
	scrape map[string]Scrape // the servers' scheme and auth, by name
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("%s:%d: %s", d.file, n.Line, fmt.Sprintf(format, args...)))
}

func (d *decoder) top(doc *yaml.Node) []parse.CustomServer {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		d.errorf(root, "the file is empty; want a top-level \"servers:\" list")
		return nil
	}
	fields, ok := d.mapping(root, "the file", topKeys)
	if !ok {
		return nil
	}
	list := fields["servers"]
	if list == nil {
		d.errorf(root, "missing key \"servers\"")
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		d.errorf(list, "\"servers\" must be a list of servers (use [] for none)")
		return nil
	}
	if len(list.Content) > parse.MaxCustomServers {
		d.errorf(list, "%d servers, at most %d allowed", len(list.Content), parse.MaxCustomServers)
		return nil
	}
	var out []parse.CustomServer
	names := map[string]int{} // name -> line
	for _, n := range list.Content {
		c, ok := d.server(n)
		if !ok {
			continue
		}
		if line, dup := names[c.Name]; dup {
			d.errorf(n, "server name %q is already used at line %d", c.Name, line)
			continue
		}
		names[c.Name] = n.Line
		out = append(out, c)
	}
	return out
}

// server reads one entry of the servers list; ok is false when it had errors.
func (d *decoder) server(n *yaml.Node) (parse.CustomServer, bool) {
	before := len(d.errs)
	fields, ok := d.mapping(n, "a server", serverKeys)
	if !ok {
		return parse.CustomServer{}, false
	}
	var c parse.CustomServer
	if v := fields["name"]; v == nil {
		d.errorf(n, "server has no \"name\"")
	} else if c.Name, ok = d.str(v, "name"); ok {
		if err := parse.CheckServerName(c.Name); err != nil {
			d.errorf(v, "%v", err)
		}
	}
	if v := fields["modelLabel"]; v != nil {
		if c.ModelLabel, ok = d.str(v, "modelLabel"); ok && !parse.IsLabelName(c.ModelLabel) {
			d.errorf(v, "modelLabel %q is not a Prometheus label name", c.ModelLabel)
		}
	}
	signals := 0
	for _, s := range []struct {
		key string
		dst *parse.Series
	}{{"queue", &c.Queue}, {"batch", &c.Batch}, {"kvCache", &c.KVCache}, {"batchFill", &c.BatchFill}} {
		if v := fields[s.key]; v != nil {
			*s.dst = d.series(v, s.key)
			signals++
		}
	}
	if signals == 0 {
		d.errorf(n, "server %q has no signals: set at least one of queue, batch, kvCache, batchFill", c.Name)
	}
	sc := d.scrapeKeys(fields)
	ok = len(d.errs) == before
	if ok && sc != (Scrape{}) {
		if d.scrape == nil {
			d.scrape = map[string]Scrape{}
		}
		d.scrape[c.Name] = sc
	}
	return c, ok
}

// scrapeKeys reads a server's scheme and auth keys.
func (d *decoder) scrapeKeys(fields map[string]*yaml.Node) Scrape {
	var sc Scrape
	if v := fields["scheme"]; v != nil {
		if s, ok := d.str(v, "scheme"); ok {
			if s != "http" && s != "https" {
				d.errorf(v, "scheme %q: want http or https", s)
			}
			sc.Scheme = s
		}
	}
	if v := fields["auth"]; v != nil {
		if s, ok := d.str(v, "auth"); ok {
			switch {
			case s != "none" && s != "bearer":
				d.errorf(v, "auth %q: want bearer or none", s)
			case s == "bearer" && sc.Scheme != "https":
				d.errorf(v, "auth bearer needs scheme: https (the bearer token is only sent over https)")
			}
			sc.Auth = s
		}
	}
	return sc
}

// series reads one signal's entry, e.g. {series: x, labels: {a: b}, scale: 0.01}.
func (d *decoder) series(n *yaml.Node, key string) parse.Series {
	var s parse.Series
	fields, ok := d.mapping(n, key, seriesKeys)
	if !ok {
		return s
	}
	if v := fields["series"]; v == nil {
		d.errorf(n, "%s has no \"series\" (the metric name)", key)
	} else if s.Name, ok = d.str(v, key+".series"); ok && !parse.IsMetricName(s.Name) {
		d.errorf(v, "%s.series %q is not a Prometheus metric name", key, s.Name)
	}
	if v := fields["labels"]; v != nil {
		s.Labels = d.labels(v, key)
	}
	if v := fields["scale"]; v != nil {
		s.Scale = d.scale(v, key)
	}
	return s
}

func (d *decoder) labels(n *yaml.Node, key string) map[string]string {
	if n = d.deref(n); n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s.labels must be a mapping of label names to values", key)
		return nil
	}
	out := map[string]string{}
	lines := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], d.deref(n.Content[i+1])
		name, ok := d.str(k, key+".labels key")
		if !ok {
			continue
		}
		if line, dup := lines[name]; dup {
			d.errorf(k, "label %q repeated (first at line %d)", name, line)
			continue
		}
		lines[name] = k.Line
		if !parse.IsLabelName(name) {
			d.errorf(k, "%q is not a Prometheus label name", name)
			continue
		}
		if v == nil {
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			d.errorf(v, "label %q needs a value (use \"\" to match series without the label)", name)
			continue
		}
		out[name] = v.Value // a number or bool is matched as written
	}
	return out
}

func (d *decoder) scale(n *yaml.Node, key string) float64 {
	if n = d.deref(n); n == nil {
		return 0
	}
	var f float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
		d.errorf(n, "%s.scale must be a number, got %q", key, n.Value)
		return 0
	}
	if !(f > 0) || math.IsInf(f, 0) {
		d.errorf(n, "%s.scale must be a positive finite number, got %s", key, n.Value)
		return 0
	}
	return f
}

// mapping checks that n is a mapping whose keys are all in known and none
// repeated, and returns its values by key.
func (d *decoder) mapping(n *yaml.Node, what string, known []string) (map[string]*yaml.Node, bool) {
	if n = d.deref(n); n == nil {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s must be a mapping with the keys %s", what, strings.Join(known, ", "))
		return nil, false
	}
	out := map[string]*yaml.Node{}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, "keys of %s must be plain words", what)
			ok = false
			continue
		}
		switch {
		case !slices.Contains(known, k.Value):
			d.errorf(k, "unknown key %q in %s (known keys: %s)", k.Value, what, strings.Join(known, ", "))
			ok = false
		case out[k.Value] != nil:
			d.errorf(k, "key %q repeated", k.Value)
			ok = false
		default:
			out[k.Value] = v
		}
	}
	return out, ok
}

// deref rejects aliases, which would make line numbers point elsewhere; it
// returns nil after reporting one.
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode {
		d.errorf(n, "aliases (*%s) are not supported; write the value out", n.Value)
		return nil
	}
	return n
}

// str returns n's value when it is a string scalar.
func (d *decoder) str(n *yaml.Node, what string) (string, bool) {
	if n = d.deref(n); n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		d.errorf(n, "%s must be a string", what)
		return "", false
	}
	return n.Value, true
}
