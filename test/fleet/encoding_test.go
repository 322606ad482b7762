// Copyright The inference-metrics-adapter Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// TestParseSubset: --questions and --encodings take a comma-separated subset
// of their known values, each at most once, in the order given; an error
// names the flag.
func TestParseSubset(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []encoding
		wantErr string
	}{
		{"json,protobuf", []encoding{encodingJSON, encodingProtobuf}, ""},
		{"protobuf", []encoding{encodingProtobuf}, ""},
		{" protobuf , json ", []encoding{encodingProtobuf, encodingJSON}, ""},
		{"yaml", nil, `--encodings: "yaml" is not one of`},
		{"", nil, `--encodings: "" is not one of`},
		{"json,json", nil, `--encodings: "json" is given twice`},
	} {
		got, err := parseEncodings(tc.in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("parseEncodings(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("parseEncodings(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
	}
	if got, err := parseQuestions("floor, list"); err != nil || !slices.Equal(got, []question{questionFloor, questionList}) {
		t.Errorf("parseQuestions = %v, %v, want [floor list]", got, err)
	}
	if _, err := parseQuestions("list,max"); err == nil || !strings.Contains(err.Error(), `--questions: "max" is not one of`) {
		t.Errorf("parseQuestions of an unknown question: error %v", err)
	}
}

// encodeAnswer encodes obj as the adapter's API server would answer in e.
func encodeAnswer(t *testing.T, obj runtime.Object, e encoding) []byte {
	t.Helper()
	s := runtime.NewScheme()
	if err := cmv1beta2.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := emv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(s)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), e.mediaType())
	if !ok {
		t.Fatalf("no serializer for %s", e.mediaType())
	}
	gv := cmv1beta2.SchemeGroupVersion
	switch obj.(type) {
	case *emv1beta1.ExternalMetricValueList:
		gv = emv1beta1.SchemeGroupVersion
	case *corev1.Namespace:
		gv = corev1.SchemeGroupVersion
	}
	b, err := runtime.Encode(codecs.EncoderForVersion(info.Serializer, gv), obj)
	if err != nil {
		t.Fatal(err)
	}
	if isProto := bytes.HasPrefix(b, []byte("k8s\x00")); isProto != (e == encodingProtobuf) {
		t.Fatalf("encoded in %s, but protobuf's prefix present: %v", e, isProto)
	}
	return b
}

// TestAnswerDecoder: one answer of each question in each encoding decodes
// to its number of values; an answer in another encoding than asked, or
// of the other question, or undecodable, is refused.
func TestAnswerDecoder(t *testing.T) {
	d, err := newAnswerDecoder()
	if err != nil {
		t.Fatal(err)
	}
	list := &cmv1beta2.MetricValueList{Items: make([]cmv1beta2.MetricValue, 3)}
	for i := range list.Items {
		list.Items[i].DescribedObject.Name = podName(i)
		list.Items[i].Metric.Name = metric
	}
	sum := &emv1beta1.ExternalMetricValueList{Items: []emv1beta1.ExternalMetricValue{{MetricName: metric}}}
	ns := &corev1.Namespace{}
	ns.Name = namespace
	for _, e := range encodings {
		for _, tc := range []struct {
			q     question
			obj   runtime.Object
			items int
		}{{questionList, list, 3}, {questionSum, sum, 1}, {questionFloor, ns, 1}, {questionDirect, list, 3}} {
			body := encodeAnswer(t, tc.obj, e)
			n, err := d.items(tc.q, e, e.mediaType(), body)
			if err != nil || n != tc.items {
				t.Errorf("%s in %s: %d items, %v; want %d", tc.q, e, n, err, tc.items)
			}
			if _, err := d.items(tc.q, e, e.mediaType()+";charset=utf-8", body); err != nil {
				t.Errorf("%s in %s with a parameter on the media type: %v", tc.q, e, err)
			}
			other := encodingJSON
			if e == encodingJSON {
				other = encodingProtobuf
			}
			if _, err := d.items(tc.q, e, other.mediaType(), body); err == nil || !strings.Contains(err.Error(), "answered with Content-Type") {
				t.Errorf("%s in %s served as %s: error %v, want the Content-Type named", tc.q, e, other, err)
			}
			wrongQ := questionSum
			if tc.q == questionSum {
				wrongQ = questionFloor
			}
			if _, err := d.items(wrongQ, e, e.mediaType(), body); err == nil || !strings.Contains(err.Error(), "was answered with a") {
				t.Errorf("%s's answer taken for %s: error %v, want the type named", tc.q, wrongQ, err)
			}
		}
		if _, err := d.items(questionList, e, e.mediaType(), []byte("not an answer")); err == nil {
			t.Errorf("garbage in %s decoded", e)
		}
		other := &corev1.Namespace{}
		other.Name = "default"
		if _, err := d.items(questionFloor, e, e.mediaType(), encodeAnswer(t, other, e)); err == nil || !strings.Contains(err.Error(), `namespace "default"`) {
			t.Errorf("another namespace taken for the floor's in %s: error %v", e, err)
		}
	}
}

// TestEncodingAsAsked: JSON is asked for as kubectl asks (gzip accepted),
// protobuf as the HPA controller asks (no compression).
func TestEncodingAsAsked(t *testing.T) {
	for _, tc := range []struct {
		e         encoding
		mediaType string
		gzip      bool
		describe  string
	}{
		{encodingJSON, "application/json", true, "json, gzip accepted"},
		{encodingProtobuf, "application/vnd.kubernetes.protobuf", false, "protobuf, no gzip"},
	} {
		if got := tc.e.mediaType(); got != tc.mediaType {
			t.Errorf("%s: media type %q, want %q", tc.e, got, tc.mediaType)
		}
		if got := tc.e.gzip(); got != tc.gzip {
			t.Errorf("%s: gzip %v, want %v", tc.e, got, tc.gzip)
		}
		if got := tc.e.describe(); got != tc.describe {
			t.Errorf("%s: described as %q, want %q", tc.e, got, tc.describe)
		}
	}
}
