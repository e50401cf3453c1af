{{- define "nfd-gpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nfd-gpu.fullname" -}}
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

{{- define "nfd-gpu.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nfd-gpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nfd-gpu.labels" -}}
{{ include "nfd-gpu.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "nfd-gpu.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nfd-gpu.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* true when the NodeFeature output (API access) is on */}}
{{- define "nfd-gpu.nodefeature" -}}
{{- if has "nodefeature" .Values.outputs }}true{{ end }}
{{- end }}

{{/* true when the pod talks to the API: the NodeFeature output, or (without it) the
removal of the NodeFeature an earlier nodefeature output left (nodeFeatureCleanup) */}}
{{- define "nfd-gpu.apiAccess" -}}
{{- if or (include "nfd-gpu.nodefeature" .) .Values.nodeFeatureCleanup }}true{{ end }}
{{- end }}

{{- define "nfd-gpu.featurefile" -}}
{{- if has "featurefile" .Values.outputs }}true{{ end }}
{{- end }}

{{- define "nfd-gpu.sharingConfigMap" -}}
{{- if .Values.sharing.configMap.name }}{{ .Values.sharing.configMap.name }}{{ else if .Values.sharing.config }}{{ include "nfd-gpu.fullname" . }}-sharing{{ end }}
{{- end }}

{{/* The image: by digest when image.digest is set, else by tag (default: appVersion). */}}
{{- define "nfd-gpu.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The cluster-scoped admission policy's name: unique per release AND namespace, so a
second release (or the kustomize install, nfd-gpu-own-nodefeature) does not collide. */}}
{{- define "nfd-gpu.admissionPolicyName" -}}
{{- printf "%s-%s-own-nodefeature" (include "nfd-gpu.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" }}
{{- end }}

{{/* Cross-field checks the schema cannot express, the agent's own (nfd_gpu/config/loader.py
_validate): a rendering the agent would refuse at start (a crash loop) fails here instead. */}}
{{- define "nfd-gpu.validate" -}}
{{- if and (include "nfd-gpu.featurefile" .) (lt (float64 .Values.featureFile.expiry) (mulf 2 .Values.interval)) }}
{{- fail (printf "featureFile.expiry (%vs) must be at least twice interval (%vs): the agent refuses it at start" .Values.featureFile.expiry .Values.interval) }}
{{- end }}
{{- $profiles := .Values.profiles | default (list "neutral") }}
{{- range .Values.profileOptions }}
{{- $profile := index (splitList "-" .) 0 }}
{{- if not (has $profile $profiles) }}
{{- fail (printf "profileOptions: %s needs the %s profile in profiles" . $profile) }}
{{- end }}
{{- end }}
{{- $set := dict "root" "" "interval" "interval" "metrics_address" "metrics.port" "log_format" "logFormat" "outputs" "outputs" }}
{{- if include "nfd-gpu.featurefile" . }}
{{- $_ := set $set "features_dir" "featureFile.dir" }}
{{- $_ := set $set "expiry" "featureFile.expiry" }}
{{- end }}
{{- /* and those it sets only when their value is: */}}
{{- $v := .Values }}
{{- range $key, $value := dict "profiles" $v.profiles "profile_options" $v.profileOptions "mig_strategy" $v.migStrategy "log_level" $v.logLevel "rules" (or $v.rules.files $v.rules.path) "sharing_config" (include "nfd-gpu.sharingConfigMap" $) }}
{{- if $value }}
{{- $_ := set $set $key (get (dict "profiles" "profiles" "profile_options" "profileOptions" "mig_strategy" "migStrategy" "log_level" "logLevel" "rules" "rules.path or rules.files" "sharing_config" "sharing") $key) }}
{{- end }}
{{- end }}
{{- range $key, $value := $set }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf "config.%s: the chart sets %s itself (its flag or variable overrides the file)%s" $key $key (ternary "" (printf "; set the value %s instead" $value) (eq $value ""))) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The pod's image pull secrets: global.imagePullSecrets (a parent chart's; names or
{name: ...}) then imagePullSecrets, each name once.
*/}}
{{- define "nfd-gpu.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat ((.Values.global | default dict).imagePullSecrets | default list) .Values.imagePullSecrets }}
{{- $n := . }}
{{- if not (kindIs "string" .) }}{{ $n = get (. | default dict) "name" }}{{ end }}
{{- if and $n (not (has $n $names)) }}
{{- $names = append $names $n }}
{{- end }}
{{- end }}
{{- range $names }}
- name: {{ . }}
{{- end }}
{{- end }}
