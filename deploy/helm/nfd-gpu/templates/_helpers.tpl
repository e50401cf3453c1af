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

{{- define "nfd-gpu.featurefile" -}}
{{- if has "featurefile" .Values.outputs }}true{{ end }}
{{- end }}

{{- define "nfd-gpu.sharingConfigMap" -}}
{{- if .Values.sharing.configMap.name }}{{ .Values.sharing.configMap.name }}{{ else if .Values.sharing.config }}{{ include "nfd-gpu.fullname" . }}-sharing{{ end }}
{{- end }}
