{{/* The name every object of this release carries. */}}
{{- define "gpuhook.name" -}}
{{- default .Release.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuhook.labels" -}}
app.kubernetes.io/name: gpuhook
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "gpuhook.selector" -}}
app.kubernetes.io/name: gpuhook
app.kubernetes.io/instance: {{ .Release.Name | quote }}
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
{{- include "gpuhook.configWith" (dict "root" . "top" (default dict .Values.config.top) "for" "the node (gpuhook's runtime, hooks and warm helper)") }}
{{- end -}}

{{/* The config of the chart's containers (device plugin, DRA driver, exporter), which run from the image: the
node's, with host_root under /host, where the node's / is mounted (the node's own host_root, under it); no
log_file (they log to the pod's log). */}}
{{- define "gpuhook.containerConfig" -}}
{{- $top := default dict .Values.config.top -}}
{{- $hostRoot := trimSuffix "/" (default "/" $top.host_root) -}}
{{- $top = merge (dict "host_root" (printf "/host%s" $hostRoot)) (omit $top "host_root" "log_file" "log_max_bytes") -}}
{{- include "gpuhook.configWith" (dict "root" . "top" $top "for" "the pod's containers (device plugin, DRA driver, exporter): the node's / is at /host") }}
{{- end -}}

{{- define "gpuhook.configWith" -}}
{{- $v := .root.Values -}}
{{- $c := $v.config -}}
{{- $dp := $v.devicePlugin -}}
# Written by the gpuhook chart (release {{ .root.Release.Name }}) for {{ .for }}; a cluster node: the kubelet grants GPUs.
{{- include "gpuhook.toml" .top }}
[policy]
{{- include "gpuhook.toml" (merge (dict "requests" "allocated") (default dict $c.policy) (dict "accept_env_requests" $v.policy.acceptEnvRequests)) }}
[tuning]
{{- include "gpuhook.toml" (merge (default dict $c.tuning) (dict "exclusive" $v.policy.exclusive)) }}
[kubernetes]
{{- include "gpuhook.toml" (merge (default dict $c.kubernetes) (dict "replicas" (int $dp.timeSlicing.replicas) "mig_strategy" $dp.migStrategy "allocate_with" $dp.allocateWith "sharing" ($dp.sharing | default "time-slicing"))) }}
[kubernetes.resources]
{{- include "gpuhook.toml" $dp.resources }}
[exporter]
{{- include "gpuhook.toml" (merge (default dict $c.exporter) (dict "listen" (printf "0.0.0.0:%d" (int $v.exporter.port)))) }}
{{- end -}}

{{/* The node's state_dir (the records the runtime verifies), as the containers that write them mount it. */}}
{{- define "gpuhook.stateDir" -}}
{{- default "/run/gpuhook" .Values.config.top.state_dir -}}
{{- end -}}

{{/* Where the node gets the build (a release from before hostDir was a value, upgraded with --reuse-values, has
none). */}}
{{- define "gpuhook.hostDir" -}}
{{- default "/usr/local/gpuhook" .Values.hostDir -}}
{{- end -}}

{{/* What node.sh (files/node.sh) is told, in the install and node containers. */}}
{{- define "gpuhook.nodeEnv" -}}
- {name: GPUHOOK_HOST_DIR, value: {{ include "gpuhook.hostDir" . | quote }}}
- {name: GPUHOOK_ENGINE, value: {{ .Values.engine | quote }}}
- {name: GPUHOOK_RESTART_ENGINE, value: {{ ternary "1" "" .Values.restartEngine | quote }}}
- {name: GPUHOOK_WARM, value: {{ ternary "1" "" .Values.warm.enabled | quote }}}
- {name: GPUHOOK_LABELS, value: {{ ternary "1" "" .Values.labels.enabled | quote }}}
{{- end -}}

{{/* The node's / (to copy the build to, and write its config and units) and node.sh, for the same two. */}}
{{- define "gpuhook.nodeMounts" -}}
- {name: host, mountPath: /host, mountPropagation: HostToContainer}
- {name: config, mountPath: /config, readOnly: true}
{{- end -}}
