{{- define "gpu-driver.labels" -}}
app.kubernetes.io/name: gpu-example-driver
app.kubernetes.io/component: kubelet-plugin
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
