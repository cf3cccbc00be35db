{{/* Object-name prefix: RELEASE-lecritique (or the release name when it already contains the chart name). */}}
{{- define "lecritique.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lecritique.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every chart object. */}}
{{- define "lecritique.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "lecritique.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: lecritique
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels put on experiment objects by the API's kubernetes launcher (besides component and experiment). */}}
{{- define "lecritique.workloadLabels" -}}
{{- dict "app.kubernetes.io/name" (include "lecritique.name" .) "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/part-of" "lecritique" "app.kubernetes.io/version" .Chart.AppVersion | toJson -}}
{{- end -}}

{{/* Selector of one component's pods: (dict "root" $ "component" "rollout"). */}}
{{- define "lecritique.componentSelector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Image reference of a values image block: (dict "image" .Values.rollout.image "name" "services" "field" "rollout.image" "root" $).
A tag "latest" is refused here, naming the field, rather than by the schema, whose 'not' error does not say what is wrong.
A lecritique image (one with a "name") whose block leaves repository empty is global.image.registry/NAME,
and its tag is the block's, else global.image.tag, else the chart's appVersion; other images (Redis)
name their own repository. A digest overrides the tag. */}}
{{- define "lecritique.image" -}}
{{- $repository := .image.repository -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if .name -}}
{{- $global := (.root.Values.global | default dict).image | default dict -}}
{{- /* Helm does not check `global` against values.schema.json: the same rules, here. */ -}}
{{- if not (regexMatch "^[a-z0-9]+([._\\-/:][a-z0-9]+)*/?$" (toString $global.registry)) -}}
{{- fail (printf "global.image.registry: %q is not a registry path such as registry.example.com/team" (toString $global.registry)) -}}
{{- end -}}
{{- if not (regexMatch "^([A-Za-z0-9_][A-Za-z0-9_.\\-]{0,127})?$" (toString ($global.tag | default ""))) -}}
{{- fail (printf "global.image.tag: %q is not an image tag" (toString $global.tag)) -}}
{{- end -}}
{{- if eq (toString $global.tag) "latest" -}}
{{- fail "global.image.tag: 'latest' is refused: pin a version" -}}
{{- end -}}
{{- if not $repository -}}
{{- $registry := trimSuffix "/" (required "global.image.registry: the registry of the lecritique images" $global.registry) -}}
{{- $repository = printf "%s/%s" $registry .name -}}
{{- end -}}
{{- $tag = .image.tag | default $global.tag | default .root.Chart.AppVersion -}}
{{- end -}}
{{- if eq (toString .image.tag) "latest" -}}
{{- fail (printf "%s.tag: 'latest' is refused: pods of one release could run different images; pin a version (e.g. %s) or leave it empty for the chart's appVersion" .field (toString .root.Chart.AppVersion)) -}}
{{- end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Redis's image: redis.image.repository when set; empty, REGISTRY/redis once global.image.registry names a
registry of your own (one that mirrors Redis, as an air-gapped cluster needs), else Docker Hub's
docker.io/library/redis (the chart's default registry publishes only the lecritique images). The tag is Redis's own. */}}
{{- define "lecritique.redisImage" -}}
{{- $image := .Values.redis.image -}}
{{- $repository := $image.repository -}}
{{- if not $repository -}}
{{- $global := (.Values.global | default dict).image | default dict -}}
{{- $registry := trimSuffix "/" (toString ($global.registry | default "")) -}}
{{- $repository = "docker.io/library/redis" -}}
{{- if and $registry (ne $registry (include "lecritique.publishedRegistry" .)) -}}
{{- $repository = printf "%s/redis" $registry -}}
{{- end -}}
{{- end -}}
{{- include "lecritique.image" (dict "image" (merge (dict "repository" $repository) (omit $image "repository")) "field" "redis.image" "root" .) -}}
{{- end -}}
{{- define "lecritique.publishedRegistry" -}}ghcr.io/lecritique{{- end -}}

{{- define "lecritique.redisName" -}}{{ include "lecritique.fullname" . }}-redis{{- end -}}
{{/* Namespace-relative, so that the same URL works after kustomize moves the objects. */}}
{{- define "lecritique.redisUrl" -}}redis://{{ include "lecritique.redisName" . }}:6379/0{{- end -}}
{{- define "lecritique.apiName" -}}{{ include "lecritique.fullname" . }}-api{{- end -}}
{{- define "lecritique.workloadServiceAccount" -}}{{ include "lecritique.fullname" . }}-workload{{- end -}}
{{- define "lecritique.weightsClaim" -}}
{{- default (printf "%s-weights" (include "lecritique.fullname" .)) .Values.weights.existingClaim -}}
{{- end -}}
{{- define "lecritique.redisSecret" -}}
{{- default (printf "%s-redis-auth" (include "lecritique.fullname" .)) .Values.redis.auth.existingSecret -}}
{{- end -}}
{{/* The API's Redis URL: user `api`, its password spliced in from LECRITIQUE_REDIS_PASSWORD by Kubernetes. */}}
{{- define "lecritique.apiRedisUrl" -}}redis://api:$(LECRITIQUE_REDIS_PASSWORD)@{{ include "lecritique.redisName" . }}:6379/0{{- end -}}
{{/* Hashes of tokens published in the lecritique repository (lecritique.tenancy.tokens.PUBLISHED_HASHES). */}}
{{- define "lecritique.publishedTokenHashes" -}}
sha256:f778a22ac59820388e330d83a53325a8766b72cdcde788f22e35bceeec42f21e
{{- end -}}

{{/* The operator's own tokens, or a Secret of them: a chart installed without either, or with a
     published example hash, would answer 401 to everyone or accept a token anyone can read. */}}
{{- define "lecritique.checkTokens" -}}
{{- $make := "make one per tenant with `lecritique api hash-token <tenant>` and install with --set api.auth.tokens.<tenant>=sha256:<hex> (or set api.auth.existingSecret to a Secret holding tokens.json)" -}}
{{- if and (not .Values.api.auth.existingSecret) (not .Values.api.auth.tokens) -}}
{{- fail (printf "api.auth.tokens is empty: the API needs a bearer token of the operator's own; %s" $make) -}}
{{- end -}}
{{- $published := splitList " " (include "lecritique.publishedTokenHashes" .) -}}
{{- range $tenant, $digest := .Values.api.auth.tokens -}}
{{- if has $digest $published -}}
{{- fail (printf "api.auth.tokens.%s is the hash of an example token published in the lecritique repository (anyone could use it); %s" $tenant $make) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "lecritique.tokensSecret" -}}
{{- default (printf "%s-api-tokens" (include "lecritique.fullname" .)) .Values.api.auth.existingSecret -}}
{{- end -}}

{{/* Pod securityContext of lecritique pods (uid 10001 of every lecritique image). */}}
{{- define "lecritique.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "lecritique.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Egress rules every lecritique pod needs: DNS, and Redis of this release. */}}
{{- define "lecritique.dnsEgress" -}}
- to:
    {{- toYaml .Values.networkPolicy.dns | nindent 4 }}
  ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end -}}

{{- define "lecritique.baseEgress" -}}
{{ include "lecritique.dnsEgress" . }}
- to:
    - podSelector:
        matchLabels:
          {{- include "lecritique.componentSelector" (dict "root" $ "component" "redis") | nindent 10 }}
  ports:
    - {port: 6379, protocol: TCP}
{{- end -}}

{{/*
Baseline NetworkPolicy of an experiment component (all experiments' pods of it): metrics from
networkPolicy.metricsFrom (any when empty); egress to DNS and Redis only (DNS only with "noRedis":
the environment verifier, which uses no Redis and scores what a policy writes). The launcher adds, per
experiment, gRPC from that experiment's orchestrator (and the value evaluator's LLM endpoints).
(dict "root" $ "component" "rollout")
*/}}
{{- define "lecritique.componentNetworkPolicy" -}}
{{- if .root.Values.networkPolicy.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "lecritique.fullname" .root }}-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "lecritique.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  podSelector:
    matchLabels:
      {{- include "lecritique.componentSelector" . | nindent 6 }}
  policyTypes: [Ingress, Egress]
  ingress:
    - ports:
        - {port: 9090, protocol: TCP}
      {{- with .root.Values.networkPolicy.metricsFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  egress:
    {{- if .noRedis }}
    {{- include "lecritique.dnsEgress" .root | nindent 4 }}
    {{- else }}
    {{- include "lecritique.baseEgress" .root | nindent 4 }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* ServiceMonitor scraping the `metrics` port of a component's Services: (dict "root" $ "component" "rollout"). */}}
{{- define "lecritique.componentServiceMonitor" -}}
{{- if .root.Values.serviceMonitor.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "lecritique.fullname" .root }}-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "lecritique.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with .root.Values.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "lecritique.componentSelector" . | nindent 6 }}
  namespaceSelector:
    matchNames: [{{ .root.Release.Namespace }}]
  endpoints:
    - port: {{ .port | default "metrics" }}
      path: {{ .path | default "/metrics" }}
      interval: {{ .root.Values.serviceMonitor.interval }}
      # The services label their own series with `experiment`; keep those, not the target's.
      honorLabels: true
{{- end }}
{{- end -}}

{{- /* The image pull secrets' names: global.imagePullSecrets then imagePullSecrets, each entry a name
or {name: NAME} (the form most charts take), duplicates dropped; a JSON list. */ -}}
{{- define "lecritique.pullSecretNames" -}}
{{- $names := list -}}
{{- $global := (.Values.global | default dict).imagePullSecrets | default list -}}
{{- range (concat $global (.Values.imagePullSecrets | default list)) -}}
{{- if kindIs "string" . }}{{ $names = append $names . }}{{ else }}{{ $names = append $names .name }}{{ end -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{- /* A pod spec's imagePullSecrets block (nothing without secrets). */ -}}
{{- define "lecritique.imagePullSecrets" -}}
{{- $names := include "lecritique.pullSecretNames" . | fromJsonArray -}}
{{- if $names }}
imagePullSecrets:
{{- range $names }}
  - name: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}
