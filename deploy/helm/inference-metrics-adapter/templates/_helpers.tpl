{{/* Chart name, limited to 63 characters. */}}
{{- define "ima.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects, limited to 63 characters. */}}
{{- define "ima.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ima.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the release. */}}
{{- define "ima.commonLabels" -}}
helm.sh/chart: {{ include "ima.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: inference-metrics-adapter
{{- end }}

{{/* Labels of the adapter's objects. */}}
{{- define "ima.labels" -}}
{{ include "ima.commonLabels" . }}
{{ include "ima.selectorLabels" . }}
{{- end }}

{{/* Selector labels of the adapter's pods. */}}
{{- define "ima.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ima.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The gpu-agent's name label: the adapter's default --gpu-agent-selector matches it. */}}
{{- define "ima.gpuAgent.name" -}}
inference-metrics-adapter-gpu-agent
{{- end }}

{{- define "ima.gpuAgent.fullname" -}}
{{- printf "%s-gpu-agent" (include "ima.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ima.gpuAgent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ima.gpuAgent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ima.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ima.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving certificate. */}}
{{- define "ima.tls.secretName" -}}
{{- if eq .Values.tls.type "existingSecret" }}
{{- required "tls.existingSecret.name is required when tls.type is existingSecret" .Values.tls.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "ima.fullname" .) }}
{{- end }}
{{- end }}

{{/* The DNS name kube-apiserver verifies in the serving certificate. */}}
{{- define "ima.serviceDNSName" -}}
{{- printf "%s.%s.svc" (include "ima.fullname" .) .Release.Namespace }}
{{- end }}

{{/*
ima.tls.helmCerts returns, as YAML, the CA and serving certificate of tls.type=helm:
the ones already in the release's Secret when it holds all three (so an upgrade keeps
them), else new ones. It computes them once per render and keeps them in .Values, so
that the Secret and the APIServices agree.
*/}}
{{- define "ima.tls.helmCerts" -}}
{{- if not (hasKey .Values "__imaHelmCerts") }}
{{- $certs := dict }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "ima.tls.secretName" .) }}
{{- if and $existing $existing.data (index $existing.data "ca.crt") (index $existing.data "tls.crt") (index $existing.data "tls.key") }}
{{- $_ := set $certs "ca" (index $existing.data "ca.crt") }}
{{- $_ := set $certs "crt" (index $existing.data "tls.crt") }}
{{- $_ := set $certs "key" (index $existing.data "tls.key") }}
{{- else }}
{{- $days := int .Values.tls.helm.certDurationDays }}
{{- $ca := genCA (printf "%s-ca" (include "ima.fullname" .)) $days }}
{{- $svc := include "ima.fullname" . }}
{{- $dns := list (include "ima.serviceDNSName" .) (printf "%s.%s" $svc .Release.Namespace) $svc }}
{{- $cert := genSignedCert (include "ima.serviceDNSName" .) nil $dns $days $ca }}
{{- $_ := set $certs "ca" ($ca.Cert | b64enc) }}
{{- $_ := set $certs "crt" ($cert.Cert | b64enc) }}
{{- $_ := set $certs "key" ($cert.Key | b64enc) }}
{{- end }}
{{- $_ := set .Values "__imaHelmCerts" $certs }}
{{- end }}
{{- toYaml (index .Values "__imaHelmCerts") }}
{{- end }}

{{/* caBundle of the APIServices (base64), empty where cert-manager injects it. */}}
{{- define "ima.apiService.caBundle" -}}
{{- if eq .Values.tls.type "helm" }}
{{- (include "ima.tls.helmCerts" . | fromYaml).ca }}
{{- else if eq .Values.tls.type "existingSecret" }}
{{- if .Values.apiService.caBundle }}
{{- .Values.apiService.caBundle | b64enc }}
{{- else if .Values.tls.existingSecret.lookup }}
{{- $s := lookup "v1" "Secret" .Release.Namespace (include "ima.tls.secretName" .) }}
{{- if and $s $s.data (index $s.data "ca.crt") }}
{{- index $s.data "ca.crt" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The adapter image. */}}
{{- define "ima.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "ima.gpuAgent.image" -}}
{{- printf "%s:%s" .Values.gpuAgent.image.repository (default .Chart.AppVersion .Values.gpuAgent.image.tag) }}
{{- end }}
