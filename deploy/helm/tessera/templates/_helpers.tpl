{{- define "tessera.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "tessera.labels" -}}
app.kubernetes.io/name: tessera
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "tessera.vnpuNamespace" -}}
{{ .Values.configMaps.vnpu.namespace | default .Release.Namespace }}
{{- end }}

{{- define "tessera.operatorSelector" -}}
app.kubernetes.io/name: tessera
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- /* The agent runs privileged: never fall back to the release namespace (restricted). */ -}}
{{- define "tessera.agentNamespace" -}}
{{ required "vnpuAgent.namespace is empty: the vNPU agent runs privileged (and the GPU agent, in the same namespace) and needs a namespace of its own whose Pod Security allows it (default tessera-agent), not the release namespace (restricted); set vnpuAgent.namespace, or vnpuAgent.enabled=false and gpuAgent.enabled=false" .Values.vnpuAgent.namespace }}
{{- end }}
