{{/* Chart name. */}}
{{- define "stratalog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name. */}}
{{- define "stratalog.fullname" -}}
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

{{- define "stratalog.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "stratalog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: stratalog
{{- end }}

{{- define "stratalog.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stratalog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "stratalog.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-operator" (include "stratalog.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "stratalog.agentServiceAccountName" -}}
{{- if .Values.agent.serviceAccount.create }}
{{- default (printf "%s-agent" (include "stratalog.fullname" .)) .Values.agent.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.agent.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "stratalog.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The agents' TLS Secret: given, or the one the chart asks cert-manager for. Fails when TLS is on without either. */}}
{{- define "stratalog.agentTLSSecret" -}}
{{- if .Values.tls.enabled -}}
{{- if .Values.tls.secretName -}}
{{- .Values.tls.secretName -}}
{{- else if .Values.tls.certManager.issuerRef -}}
{{- printf "%s-agent-tls" (include "stratalog.fullname" .) -}}
{{- else -}}
{{- fail "tls.enabled (the default) needs tls.secretName (a Secret with tls.crt, tls.key and ca.crt in each LogDir namespace, e.g. from cert-manager) or tls.certManager.issuerRef; or set tls.enabled=false to serve the agents' API over plain HTTP" -}}
{{- end -}}
{{- end -}}
{{- end -}}
