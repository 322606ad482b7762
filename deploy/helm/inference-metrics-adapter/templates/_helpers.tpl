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

{{/*
"true" when the API NetworkPolicy is on: apiNetworkPolicy.enabled, true when absent (an
upgrade with --reuse-values from a chart that had no such value keeps that chart's
defaults).
*/}}
{{- define "ima.apiNetworkPolicy.enabled" -}}
{{- $np := .Values.apiNetworkPolicy | default dict }}
{{- if ternary $np.enabled true (hasKey $np "enabled") }}true{{ end }}
{{- end }}

{{/* "true" when the chart creates the gpu-agent's namespace (see values.yaml). */}}
{{- define "ima.gpuAgent.createNamespace" -}}
{{- $g := .Values.gpuAgent }}
{{- if and $g.enabled (ternary $g.createNamespace true (hasKey $g "createNamespace")) (ne (include "ima.gpuAgent.namespace" .) .Release.Namespace) }}true{{ end }}
{{- end }}

{{/*
The gpu-agent's namespace: gpuAgent.namespace, else <release namespace>-gpu-agent. The
adapter trusts agents only there (--gpu-agent-namespace).
*/}}
{{- define "ima.gpuAgent.namespace" -}}
{{- default (printf "%s-gpu-agent" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.gpuAgent.namespace }}
{{- end }}

{{/*
ima.gpuAgent.readable is "true" when the chart can grant the adapter reading pods in the
agent's namespace with adapter.namespaces set: the namespace exists because the chart runs
the agent there, it is the release's, or it is one of adapter.namespaces. A Role in a
namespace that does not exist would fail the install.
*/}}
{{- define "ima.gpuAgent.readable" -}}
{{- $ns := include "ima.gpuAgent.namespace" . }}
{{- if or .Values.gpuAgent.enabled (eq $ns .Release.Namespace) (has $ns .Values.adapter.namespaces) }}true{{ end }}
{{- end }}

{{/*
ima.gpuAgent.watched is "true" when the adapter looks for gpu-agents: always without
adapter.namespaces (its ClusterRole reads every namespace), else only where it may read.
*/}}
{{- define "ima.gpuAgent.watched" -}}
{{- if or (not .Values.adapter.namespaces) (include "ima.gpuAgent.readable" .) }}true{{ end }}
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

{{/* The annotation of the chart's Secret that holds its certificate's expiry (RFC 3339). */}}
{{- define "ima.tls.notAfterKey" -}}
inference-metrics-adapter/not-after
{{- end }}

{{/*
ima.tls.helmCerts returns, as YAML, the CA bundle, serving certificate, key and expiry
(notAfter) of tls.type=helm. It keeps those already in the release's Secret (read with
lookup) while its not-after annotation is more than tls.helm.renewBeforeDays away, so an
upgrade keeps them. Else (first install, helm template, a Secret near expiry, or one an
earlier chart made without the annotation) it issues a new CA and certificate for
tls.helm.certDurationDays; when it replaces a Secret's, the bundle holds the new CA and
the one that signed the old certificate, so that kube-apiserver trusts both the replicas
that already serve the new certificate and those still serving the old one. It computes
them once per render and keeps them in .Values, so that the Secret, the APIServices and
the Deployment's checksum agree.
*/}}
{{- define "ima.tls.helmCerts" -}}
{{- if not (hasKey .Values "__imaHelmCerts") }}
{{- $certs := dict }}
{{- $h := .Values.tls.helm }}
{{- $days := int (default 365 $h.certDurationDays) }}
{{- $renewDays := 30 }}
{{- if hasKey $h "renewBeforeDays" }}
{{- $renewDays = int $h.renewBeforeDays }}
{{- end }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "ima.tls.secretName" .) }}
{{- $previousCA := "" }}
{{- if and $existing $existing.data (index $existing.data "ca.crt") (index $existing.data "tls.crt") (index $existing.data "tls.key") }}
{{- $previousCA = index $existing.data "ca.crt" | b64dec }}
{{- $notAfter := dig "metadata" "annotations" (include "ima.tls.notAfterKey" .) "" $existing }}
{{- if $notAfter }}
{{- /* toDate gives the zero time for a malformed value: renewed. */}}
{{- $renewAt := toDate "2006-01-02T15:04:05Z07:00" $notAfter | dateModify (printf "-%dh" (mul $renewDays 24)) }}
{{- if lt (now | unixEpoch | int64) ($renewAt | unixEpoch | int64) }}
{{- $_ := set $certs "ca" (index $existing.data "ca.crt") }}
{{- $_ := set $certs "crt" (index $existing.data "tls.crt") }}
{{- $_ := set $certs "key" (index $existing.data "tls.key") }}
{{- $_ := set $certs "notAfter" $notAfter }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $certs.crt }}
{{- $ca := genCA (printf "%s-ca" (include "ima.fullname" .)) $days }}
{{- $svc := include "ima.fullname" . }}
{{- $dns := list (include "ima.serviceDNSName" .) (printf "%s.%s" $svc .Release.Namespace) $svc }}
{{- $cert := genSignedCert (include "ima.serviceDNSName" .) nil $dns $days $ca }}
{{- $bundle := $ca.Cert }}
{{- with regexFind "(?s)-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----" $previousCA }}
{{- $bundle = printf "%s\n%s\n" (trimSuffix "\n" $ca.Cert) . }}
{{- end }}
{{- $_ := set $certs "ca" ($bundle | b64enc) }}
{{- $_ := set $certs "crt" ($cert.Cert | b64enc) }}
{{- $_ := set $certs "key" ($cert.Key | b64enc) }}
{{- $_ := set $certs "notAfter" (dateInZone "2006-01-02T15:04:05Z07:00" (now | dateModify (printf "%dh" (mul $days 24))) "UTC") }}
{{- end }}
{{- $_ := set .Values "__imaHelmCerts" $certs }}
{{- end }}
{{- toYaml (index .Values "__imaHelmCerts") }}
{{- end }}

{{/* caBundle of the APIServices (base64), empty where cert-manager injects it. */}}
{{- define "ima.apiService.caBundle" -}}
{{- if eq .Values.tls.type "helm" }}
{{- (include "ima.tls.helmCerts" . | fromYaml).ca }}
{{- else if eq .Values.tls.type "values" }}
{{- required "tls.values.ca is required when tls.type is values (the CA bundle that verifies tls.values.cert)" .Values.tls.values.ca | b64enc }}
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
