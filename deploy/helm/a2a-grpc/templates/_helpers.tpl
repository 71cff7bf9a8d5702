{{/* The release's name for every object: the release name, with the chart's unless it holds it. */}}
{{- define "a2a-grpc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "a2a-grpc.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "a2a-grpc.labels" -}}
{{ include "a2a-grpc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "a2a-grpc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "a2a-grpc.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The store is Redis when a Secret names its URL; otherwise each pod's memory. */}}
{{- define "a2a-grpc.redis" -}}
{{- if .Values.store.redis.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* Seconds Kubernetes waits after SIGTERM: more than the drain delay and the grace together
(docs/operations.md), with 10 s to spare, and 10 more for a --workers supervisor. */}}
{{- define "a2a-grpc.terminationGracePeriodSeconds" -}}
{{- $drain := addf .Values.drain.delaySeconds .Values.drain.graceSeconds -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add (int (ceil $drain)) 10 (ternary 10 0 (gt (int .Values.workers) 1)) -}}
{{- else if le (float64 .Values.terminationGracePeriodSeconds) $drain -}}
{{- fail (printf "terminationGracePeriodSeconds %v must be more than drain.delaySeconds + drain.graceSeconds (%v): Kubernetes would kill the server before it drained" .Values.terminationGracePeriodSeconds $drain) -}}
{{- else -}}
{{- int .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/* The settings `serve` would refuse, or that cannot work in a cluster, refused here first. */}}
{{- define "a2a-grpc.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "a2a-grpc.redis" .)) -}}
{{- fail (printf "replicaCount %d needs the Redis store (store.redis.existingSecret): with tasks in memory, each replica would answer TASK_NOT_FOUND for the others' tasks" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and (gt (int .Values.workers) 1) (not (include "a2a-grpc.redis" .)) -}}
{{- fail (printf "workers %d needs the Redis store (store.redis.existingSecret): the workers share their tasks through it" (int .Values.workers)) -}}
{{- end -}}
{{- if and .Values.auth.mtls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "auth.mtls.enabled needs tls.existingSecret: client certificates are checked in the TLS handshake" -}}
{{- end -}}
{{- $jwt := .Values.auth.jwt -}}
{{- if and $jwt.oidcIssuer $jwt.jwks -}}
{{- fail "auth.jwt: set oidcIssuer or jwks, not both" -}}
{{- end -}}
{{- if and (or $jwt.oidcIssuer $jwt.jwks) (not $jwt.audience) -}}
{{- fail "auth.jwt.audience is required with oidcIssuer or jwks: the aud every JWT must hold" -}}
{{- end -}}
{{- if and $jwt.jwks (not $jwt.issuer) -}}
{{- fail "auth.jwt.jwks needs auth.jwt.issuer: the iss every JWT must carry" -}}
{{- end -}}
{{- if and .Values.auth.trustDomains (not (or .Values.auth.mtls.enabled .Values.auth.xfcc.enabled)) -}}
{{- fail "auth.trustDomains needs auth.mtls.enabled or auth.xfcc.enabled: they name the trust domains of client certificates and forwarded ones" -}}
{{- end -}}
{{- end -}}

{{/* The address the card lists: the Service's name in the cluster, unless `advertise` says. */}}
{{- define "a2a-grpc.advertise" -}}
{{- default (printf "%s.%s.svc:%d" (include "a2a-grpc.fullname" .) .Release.Namespace (int .Values.ports.grpc)) .Values.advertise -}}
{{- end -}}

{{/* `serve`'s command line: the entry point is a2a-grpc. */}}
{{- define "a2a-grpc.args" -}}
- serve
- --host
- {{ .Values.host | quote }}
- --port
- {{ .Values.ports.grpc | int | quote }}
- --http-port
- {{ .Values.ports.http | int | quote }}
- --advertise
- {{ include "a2a-grpc.advertise" . | quote }}
- --drain-delay
- {{ .Values.drain.delaySeconds | toString | quote }}
- --shutdown-grace
- {{ .Values.drain.graceSeconds | toString | quote }}
{{- if gt (int .Values.workers) 1 }}
- --workers
- {{ .Values.workers | int | quote }}
{{- end }}
{{- with .Values.agent.module }}
- --agent
- {{ . | quote }}
{{- end }}
{{- if .Values.tls.existingSecret }}
- --tls-cert
- /etc/a2a-grpc/tls/tls.crt
- --tls-key
- /etc/a2a-grpc/tls/tls.key
{{- end }}
{{- if .Values.auth.mtls.enabled }}
- --client-ca
- {{ printf "/etc/a2a-grpc/client-ca/%s" .Values.auth.mtls.key | quote }}
{{- end }}
{{- if .Values.auth.tokens.existingSecret }}
- --auth-tokens
- {{ printf "/etc/a2a-grpc/tokens/%s" .Values.auth.tokens.key | quote }}
{{- end }}
{{- with .Values.auth.jwt }}
{{- if .oidcIssuer }}
- --oidc-issuer
- {{ .oidcIssuer | quote }}
{{- end }}
{{- if .jwks }}
- --jwks
- {{ .jwks | quote }}
- --jwt-issuer
- {{ .issuer | quote }}
{{- end }}
{{- if .audience }}
- --jwt-audience
- {{ .audience | quote }}
{{- end }}
{{- if .principalClaim }}
- --jwt-principal-claim
- {{ .principalClaim | quote }}
{{- end }}
{{- if .algorithms }}
- --jwt-algorithms
- {{ join "," .algorithms | quote }}
{{- end }}
{{- end }}
{{- if .Values.auth.xfcc.enabled }}
- --trust-xfcc
{{- range .Values.auth.xfcc.trustedProxies }}
- --trusted-proxy
- {{ . | quote }}
{{- end }}
{{- end }}
{{- range .Values.auth.trustDomains }}
- --trust-domain
- {{ . | quote }}
{{- end }}
{{- if not .Values.metrics.enabled }}
- --no-metrics
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* A probe's handler: HTTP on the HTTP port, HTTPS with TLS, and a TCP connect with mutual
TLS (the kubelet has no client certificate to show). */}}
{{- define "a2a-grpc.probeHandler" -}}
{{- if .root.Values.auth.mtls.enabled -}}
tcpSocket:
  port: grpc
{{- else -}}
httpGet:
  path: {{ .path }}
  port: http
  scheme: {{ ternary "HTTPS" "HTTP" (not (empty .root.Values.tls.existingSecret)) }}
{{- end -}}
{{- end -}}
