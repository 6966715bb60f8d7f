{{/*
Naming, labels and the names of the objects other templates refer to.
*/}}

{{- define "dpstream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: release-chart, unless the release name already contains the chart name. */}}
{{- define "dpstream.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dpstream.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dpstream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dpstream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dpstream.labels" -}}
{{ include "dpstream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dpstream
helm.sh/chart: {{ include "dpstream.chart" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations block for commonAnnotations merged with extra ones (a dict). */}}
{{- define "dpstream.annotations" -}}
{{- $all := merge (deepCopy (default (dict) .extra)) (deepCopy .context.Values.commonAnnotations) -}}
{{- with $all -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "dpstream.image" -}}
{{- $registry := default .Values.image.registry .Values.global.imageRegistry -}}
{{- $repo := .Values.image.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" $registry $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "dpstream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dpstream.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dpstream.headlessServiceName" -}}
{{- printf "%s-headless" (include "dpstream.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dpstream.configMapName" -}}
{{- default (include "dpstream.fullname" .) .Values.existingConfigmap -}}
{{- end -}}

{{- define "dpstream.configMapKey" -}}
{{- if .Values.existingConfigmap -}}{{ .Values.existingConfigmapKey }}{{- else -}}streams.yaml{{- end -}}
{{- end -}}

{{- define "dpstream.noiseKeySecretName" -}}
{{- default (include "dpstream.fullname" .) .Values.noiseKey.existingSecret -}}
{{- end -}}

{{- define "dpstream.noiseKeySecretKey" -}}
{{- if .Values.noiseKey.existingSecret -}}{{ .Values.noiseKey.existingSecretKey }}{{- else -}}noise-key{{- end -}}
{{- end -}}

{{- define "dpstream.saslEnabled" -}}
{{- if hasPrefix "SASL_" .Values.kafka.securityProtocol -}}true{{- end -}}
{{- end -}}

{{- define "dpstream.tlsEnabled" -}}
{{- if has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL") -}}true{{- end -}}
{{- end -}}

{{- define "dpstream.saslSecretName" -}}
{{- default (printf "%s-kafka" (include "dpstream.fullname" .)) .Values.kafka.sasl.existingSecret -}}
{{- end -}}

{{- define "dpstream.saslSecretKey" -}}
{{- if .Values.kafka.sasl.existingSecret -}}{{ .Values.kafka.sasl.existingSecretPasswordKey }}{{- else -}}password{{- end -}}
{{- end -}}

{{/* The CA certificate: an existing Secret, or a Secret the chart creates from caCert. "" when none. */}}
{{- define "dpstream.tlsSecretName" -}}
{{- if .Values.kafka.tls.existingSecret -}}
{{- .Values.kafka.tls.existingSecret -}}
{{- else if .Values.kafka.tls.caCert -}}
{{- printf "%s-kafka-ca" (include "dpstream.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "dpstream.tlsSecretKey" -}}
{{- if .Values.kafka.tls.existingSecret -}}{{ .Values.kafka.tls.existingSecretCaKey }}{{- else -}}ca.crt{{- end -}}
{{- end -}}

{{/* Environment shared by the worker and the topics init container. */}}
{{- define "dpstream.env" -}}
- name: DPSTREAM_CONFIG
  value: /etc/dpstream/config/streams.yaml
- name: DPSTREAM_BROKER
  value: {{ .Values.kafka.brokers | quote }}
- name: DPSTREAM_TOPIC_PREFIX
  value: {{ .Values.topics.prefix | quote }}
- name: DPSTREAM_STATE_DIR
  value: {{ .Values.persistence.mountPath | quote }}
- name: DPSTREAM_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: DPSTREAM_METRICS_BIND
  value: "0.0.0.0"
- name: DPSTREAM_EXPOSE_DATA_COUNTS
  value: {{ ternary "true" "false" .Values.metrics.exposeDataCounts | quote }}
- name: DPSTREAM_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: DPSTREAM_NOISE_KEY_FILE
  value: /etc/dpstream/secrets/noise-key
- name: DPSTREAM_DEPLOYMENT
  value: {{ .Values.noiseKey.deploymentId | default (printf "%s.%s" .Release.Name .Release.Namespace) | quote }}
- name: DPSTREAM_KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
{{- if include "dpstream.saslEnabled" . }}
- name: DPSTREAM_KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: DPSTREAM_KAFKA_SASL_USERNAME
  value: {{ .Values.kafka.sasl.username | quote }}
- name: DPSTREAM_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "dpstream.saslSecretName" . }}
      key: {{ include "dpstream.saslSecretKey" . }}
{{- end }}
{{- if include "dpstream.tlsSecretName" . }}
- name: DPSTREAM_KAFKA_SSL_CAFILE
  value: /etc/dpstream/tls/ca.crt
{{- end }}
- name: HOME
  value: /tmp
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- with .Values.extraEnvVars }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volume mounts shared by the worker and the topics init container. */}}
{{- define "dpstream.volumeMounts" -}}
- name: config
  mountPath: /etc/dpstream/config
  readOnly: true
- name: noise-key
  mountPath: /etc/dpstream/secrets
  readOnly: true
{{- if include "dpstream.tlsSecretName" . }}
- name: kafka-ca
  mountPath: /etc/dpstream/tls
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "dpstream.containerSecurityContext" -}}
{{- if .Values.containerSecurityContext.enabled -}}
securityContext:
  {{- toYaml (omit .Values.containerSecurityContext "enabled") | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* Fail early on combinations that cannot work. */}}
{{- define "dpstream.validateValues" -}}
{{- if and (include "dpstream.saslEnabled" .) (not .Values.kafka.sasl.username) -}}
{{- fail "kafka.sasl.username is required when kafka.securityProtocol is SASL_PLAINTEXT or SASL_SSL" -}}
{{- end -}}
{{- if and (include "dpstream.saslEnabled" .) (not .Values.kafka.sasl.existingSecret) (not .Values.kafka.sasl.password) -}}
{{- fail "set kafka.sasl.password or kafka.sasl.existingSecret when kafka.securityProtocol is SASL_PLAINTEXT or SASL_SSL" -}}
{{- end -}}
{{- if and .Values.pdb.create (eq (toString .Values.pdb.minAvailable) "") (eq (toString .Values.pdb.maxUnavailable) "") -}}
{{- fail "pdb.create needs pdb.minAvailable or pdb.maxUnavailable" -}}
{{- end -}}
{{- end -}}
