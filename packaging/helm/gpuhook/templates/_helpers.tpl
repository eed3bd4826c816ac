{{/* The name every object of this release carries. */}}
{{- define "gpuhook.name" -}}
{{- default .Release.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuhook.labels" -}}
app.kubernetes.io/name: gpuhook
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuhook.selector" -}}
app.kubernetes.io/name: gpuhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuhook.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* A TOML table's keys: each value as JSON, which for strings, numbers, booleans and arrays of them is TOML. */}}
{{- define "gpuhook.toml" -}}
{{- range $k, $v := . }}
{{ $k }} = {{ toJson $v }}
{{- end }}
{{- end -}}

{{/* The node's config.toml: a cluster node, where only the kubelet grants GPUs. The chart's values first, then
.Values.config's keys over them (any key of docs/configuration.md); requests = "allocated" always. */}}
{{- define "gpuhook.config" -}}
{{- $c := .Values.config -}}
{{- $dp := .Values.devicePlugin -}}
# Written by the gpuhook chart (release {{ .Release.Name }}); a cluster node: the kubelet grants GPUs.
{{- include "gpuhook.toml" (default dict $c.top) }}
[policy]
{{- include "gpuhook.toml" (merge (dict "requests" "allocated") (default dict $c.policy) (dict "accept_env_requests" .Values.policy.acceptEnvRequests)) }}
[tuning]
{{- include "gpuhook.toml" (merge (default dict $c.tuning) (dict "exclusive" .Values.policy.exclusive)) }}
[kubernetes]
{{- include "gpuhook.toml" (merge (default dict $c.kubernetes) (dict "replicas" (int $dp.timeSlicing.replicas) "mig_strategy" $dp.migStrategy "allocate_with" $dp.allocateWith "sharing" ($dp.sharing | default "time-slicing"))) }}
[kubernetes.resources]
{{- include "gpuhook.toml" $dp.resources }}
[exporter]
{{- include "gpuhook.toml" (merge (default dict $c.exporter) (dict "listen" (printf "0.0.0.0:%d" (int .Values.exporter.port)))) }}
{{- end -}}
