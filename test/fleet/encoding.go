// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"mime"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// encoding is how a latency run asks for its answers: as kubectl and most
// tools ask, in JSON and accepting gzip (which the API servers apply to
// answers over 128 KiB), or as the HPA controller asks, in protobuf and
// without compression (kube-controller-manager's --kube-api-content-type
// defaults to protobuf, it sets DisableCompression, and its metrics
// clients inherit both). The answer's bytes, and so the work of every
// process on its path, differ between the two.
type encoding string

const (
	encodingJSON     encoding = "json"
	encodingProtobuf encoding = "protobuf"
)

// encodings are the known ones, in the order the runs take them.
var encodings = []encoding{encodingJSON, encodingProtobuf}

// mediaType is the Accept header that asks for e, and the Content-Type of
// an answer in e.
func (e encoding) mediaType() string {
	if e == encodingProtobuf {
		return runtime.ContentTypeProtobuf
	}
	return runtime.ContentTypeJSON
}

// gzip tells whether the client asks in e accepting gzip.
func (e encoding) gzip() bool { return e == encodingJSON }

// describe names e and how it is asked for in the tables.
func (e encoding) describe() string {
	if e.gzip() {
		return fmt.Sprintf("%s, gzip accepted", e)
	}
	return fmt.Sprintf("%s, no gzip", e)
}

// parseEncodings parses --encodings: a comma-separated subset of
// encodings, each at most once.
func parseEncodings(s string) ([]encoding, error) { return parseSubset("--encodings", s, encodings) }

// parseSubset parses flag's value s: a comma-separated subset of known,
// each at most once, in the order given.
func parseSubset[T ~string](flag, s string, known []T) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		e := T(strings.TrimSpace(f))
		switch {
		case !slices.Contains(known, e):
			return nil, fmt.Errorf("%s: %q is not one of %v", flag, f, known)
		case slices.Contains(out, e):
			return nil, fmt.Errorf("%s: %q is given twice", flag, e)
		}
		out = append(out, e)
	}
	return out, nil
}

// answerDecoder decodes the questions' answers in either encoding.
type answerDecoder struct {
	decoder runtime.Decoder
}

func newAnswerDecoder() (*answerDecoder, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{cmv1beta2.AddToScheme, emv1beta1.AddToScheme, corev1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("answer scheme: %w", err)
		}
	}
	return &answerDecoder{decoder: serializer.NewCodecFactory(s).UniversalDeserializer()}, nil
}

// items checks that body, served with contentType, is q's answer in e,
// and returns how many values it holds (the floor's Namespace counts as
// one).
func (d *answerDecoder) items(q question, e encoding, contentType string, body []byte) (int, error) {
	if err := checkContentType(e, contentType); err != nil {
		return 0, err
	}
	obj, _, err := d.decoder.Decode(body, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("decode the %s answer (%s): %w", q, e, err)
	}
	switch a := obj.(type) {
	case *cmv1beta2.MetricValueList:
		if q == questionList || q == questionDirect {
			return len(a.Items), nil
		}
	case *emv1beta1.ExternalMetricValueList:
		if q == questionSum {
			return len(a.Items), nil
		}
	case *corev1.Namespace:
		if q == questionFloor {
			if a.Name != namespace {
				return 0, fmt.Errorf("the floor question was answered with namespace %q, want %q", a.Name, namespace)
			}
			return 1, nil
		}
	}
	return 0, fmt.Errorf("the %s question was answered with a %T", q, obj)
}

// checkContentType fails unless contentType is e's media type: a server
// that answered in another encoding than the one asked would be timed
// for the wrong work.
func checkContentType(e encoding, contentType string) error {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != e.mediaType() {
		return fmt.Errorf("asked for %s, answered with Content-Type %q", e.mediaType(), contentType)
	}
	return nil
}
