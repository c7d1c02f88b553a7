{{/* Chart name, overridable. */}}
{{- define "orrery.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name: "<release>-orrery", or the release name when it already contains the chart name. */}}
{{- define "orrery.fullname" -}}
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

{{- define "orrery.primary.fullname" -}}
{{- printf "%s-primary" (include "orrery.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "orrery.apiAuthSecretName" -}}
{{- default (printf "%s-api-auth" (include "orrery.primary.fullname" .)) .Values.primary.auth.existingSecret -}}
{{- end -}}

{{- define "orrery.apiAuthSecretKey" -}}
{{- if .Values.primary.auth.existingSecret -}}
{{- .Values.primary.auth.existingSecretKey -}}
{{- else -}}
tokens.toml
{{- end -}}
{{- end -}}

{{- define "orrery.satellite.fullname" -}}
{{- printf "%s-satellite" (include "orrery.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "orrery.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every resource. */}}
{{- define "orrery.labels" -}}
helm.sh/chart: {{ include "orrery.chart" . }}
app.kubernetes.io/name: {{ include "orrery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: orrery
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component ("primary" or "satellite"): pass (dict "ctx" $ "component" "primary"). */}}
{{- define "orrery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "orrery.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "orrery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "orrery.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "orrery.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The NATS URL(s) clients use. */}}
{{- define "orrery.natsUrl" -}}
{{- if .Values.natsClient.url -}}
{{- .Values.natsClient.url -}}
{{- else if .Values.nats.enabled -}}
{{- $scheme := ternary "tls" "nats" (eq (include "orrery.natsTls" .) "true") -}}
{{- printf "%s://%s-nats:4222" $scheme .Release.Name -}}
{{- else -}}
{{- fail "natsClient.url is required when nats.enabled is false" -}}
{{- end -}}
{{- end -}}

{{/* "true" when clients connect to NATS over TLS: natsClient.tls.enabled, or tls.enabled when that is null. */}}
{{- define "orrery.natsTls" -}}
{{- $v := .Values.natsClient.tls.enabled -}}
{{- if kindIs "invalid" $v -}}{{ .Values.tls.enabled | toString }}{{- else -}}{{ $v | toString }}{{- end -}}
{{- end -}}

{{/* The Secret whose ca.crt clients verify NATS with. */}}
{{- define "orrery.natsTlsSecret" -}}
{{- default .Values.tls.natsSecretName .Values.natsClient.tls.secretName -}}
{{- end -}}

{{/* The Secret holding the PostgreSQL store's secret key, and its key. */}}
{{- define "orrery.secretKeySecretName" -}}
{{- default (printf "%s-secret-key" (include "orrery.fullname" .)) .Values.primary.store.postgres.secretKey.existingSecret -}}
{{- end -}}
{{- define "orrery.secretKeySecretKey" -}}
{{- if .Values.primary.store.postgres.secretKey.existingSecret -}}{{ .Values.primary.store.postgres.secretKey.existingSecretKey }}{{- else -}}secret.key{{- end -}}
{{- end -}}

{{/* File name of a role's credential in the credentials Secret: pass (dict "ctx" $ "role" "primary"). */}}
{{- define "orrery.credFile" -}}
{{- $mode := .ctx.Values.natsClient.auth.mode -}}
{{- if eq $mode "nkey" -}}{{ .role }}.nk{{- else if eq $mode "creds" -}}{{ .role }}.creds{{- end -}}
{{- end -}}

{{/* Checks run once, from the satellite Deployment. */}}
{{- define "orrery.validate" -}}
{{- $mode := .Values.natsClient.auth.mode -}}
{{- if not (has $mode (list "nkey" "creds" "none")) -}}
{{- fail (printf "natsClient.auth.mode must be nkey, creds or none (got %q)" $mode) -}}
{{- end -}}
{{- if and (ne $mode "none") (not .Values.natsClient.auth.secretName) -}}
{{- fail "natsClient.auth.secretName is required unless natsClient.auth.mode is none" -}}
{{- end -}}
{{- if and .Values.natsClient.auth.createSecret (ne $mode "none") -}}
{{- if not (and .Values.natsClient.auth.primary .Values.natsClient.auth.satellite) -}}
{{- fail "natsClient.auth.createSecret needs natsClient.auth.primary and natsClient.auth.satellite" -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.primary.store.type (list "embedded" "postgres")) -}}
{{- fail (printf "primary.store.type must be embedded or postgres (got %q)" .Values.primary.store.type) -}}
{{- end -}}
{{- if and (eq .Values.primary.store.type "postgres") (not (or .Values.primary.store.postgres.url .Values.primary.store.postgres.existingSecret)) -}}
{{- fail "primary.store.type=postgres needs primary.store.postgres.url or primary.store.postgres.existingSecret" -}}
{{- end -}}
{{- if le (int .Values.satellite.terminationGracePeriodSeconds) (add (int .Values.satellite.drainGraceSeconds) 5) -}}
{{- fail (printf "satellite.terminationGracePeriodSeconds (%d) must exceed satellite.drainGraceSeconds (%d) by more than 5 s, or Kubernetes kills satellites mid-drain" (int .Values.satellite.terminationGracePeriodSeconds) (int .Values.satellite.drainGraceSeconds)) -}}
{{- end -}}
{{- $natsTls := eq (include "orrery.natsTls" .) "true" -}}
{{- if and $natsTls (not .Values.nats.enabled) .Values.natsClient.url (not .Values.natsClient.tls.secretName) -}}
{{- fail "TLS to your own NATS (nats.enabled=false) needs natsClient.tls.secretName (a Secret with its CA as ca.crt); plain connections only with natsClient.tls.enabled=false" -}}
{{- end -}}
{{- if .Values.nats.enabled -}}
{{- $ntls := .Values.nats.config.nats.tls | default dict -}}
{{- $ltls := .Values.nats.config.leafnodes.tls | default dict -}}
{{- if ne (toString (default false $ntls.enabled)) (toString .Values.tls.enabled) -}}
{{- fail (printf "tls.enabled is %v but the bundled NATS's nats.config.nats.tls.enabled is %v: set both (plain NATS only as an explicit opt-out of both)" .Values.tls.enabled (default false $ntls.enabled)) -}}
{{- end -}}
{{- if and .Values.nats.config.leafnodes.enabled (ne (toString (default false $ltls.enabled)) (toString .Values.tls.enabled)) -}}
{{- fail (printf "tls.enabled is %v but the bundled NATS's nats.config.leafnodes.tls.enabled is %v: set both (plain leaf connections only as an explicit opt-out of both)" .Values.tls.enabled (default false $ltls.enabled)) -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- if or (ne (toString $ntls.secretName) .Values.tls.natsSecretName) (and .Values.nats.config.leafnodes.enabled (ne (toString $ltls.secretName) .Values.tls.natsSecretName)) -}}
{{- fail (printf "nats.config.nats.tls.secretName and nats.config.leafnodes.tls.secretName must be tls.natsSecretName (%s)" .Values.tls.natsSecretName) -}}
{{- end -}}
{{- if ne (toString $natsTls) "true" -}}
{{- fail "the bundled NATS serves TLS (tls.enabled) but natsClient.tls.enabled is false: clients could not connect" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.satellite.autoscaling.enabled (gt (int .Values.satellite.autoscaling.minReplicas) (int .Values.satellite.autoscaling.maxReplicas)) -}}
{{- fail "satellite.autoscaling.minReplicas must not exceed maxReplicas" -}}
{{- end -}}
{{- if not .Values.satellite.plugins -}}
{{- fail "satellite.plugins must list at least one plugin binary" -}}
{{- end -}}
{{- if and (not .Values.satellite.everyTarget) (not .Values.satellite.targets) -}}
{{- fail "satellite.targets is empty: the satellites would serve every target with one identity; list their targets (gen-nkeys.py --satellite NAME=PLUGIN:TARGET,... --helm-values FILE), or opt in with satellite.everyTarget=true" -}}
{{- end -}}
{{- include "orrery.validateSatellitePermissions" . -}}
{{- end -}}

{{/* The bundled NATS's satellite user must allow what the satellites
subscribe to: orrery.op.<plugin>.<target> for every plugin (the binary's name
without "orrery-plugin-") and target (every target: orrery.op.<plugin>.*),
and the same targets' orrery.describe.<plugin>.<target> (every target:
orrery.describe.<plugin>.* and orrery.describe.<plugin>). A missing subject would leave satellites
serving nothing; listing them per plugin and target keeps the key from
receiving any other operation. */}}
{{- define "orrery.validateSatellitePermissions" -}}
{{- $v := .Values -}}
{{- if and $v.nats.enabled (eq $v.natsClient.auth.mode "nkey") -}}
{{- $users := list -}}
{{- with $v.nats.config -}}{{- with .merge -}}{{- with .accounts -}}{{- with .ORRERY -}}{{- $users = .users | default list -}}{{- end -}}{{- end -}}{{- end -}}{{- end -}}
{{- range $u := $users -}}
{{- if and (not $v.satellite.everyTarget) (has (toString $u.nkey) (list "<< $ORRERY_NKEY_SATELLITE >>" "<< $ORRERY_NKEY_LEAF >>")) -}}
{{- $subs := list -}}
{{- with $u.permissions -}}{{- with .subscribe -}}{{- $subs = .allow | default list -}}{{- end -}}{{- end -}}
{{- range $subj := $subs -}}
{{- $subj = toString $subj -}}
{{- if or (hasPrefix "orrery.op." $subj) (hasPrefix "orrery.describe." $subj) (eq $subj "orrery.>") (eq $subj ">") (hasPrefix "orrery.*" $subj) -}}
{{- /* orrery.op.<plugin>.<target>.* is one target's direct subjects (satellite receipts), not every target's */ -}}
{{- $direct := and (hasPrefix "orrery.op." $subj) (hasSuffix ".*" $subj) (eq (len (splitList "." $subj)) 5) (not (contains "*" (trimSuffix ".*" $subj))) (not (contains ">" $subj)) -}}
{{- if and (not $direct) (or (contains "*" $subj) (contains ">" $subj) (and (hasPrefix "orrery.describe." $subj) (eq (len (splitList "." $subj)) 3))) -}}
{{- fail (printf "nats.config.merge: the user %s may subscribe to %s, every target's operations or describe: list orrery.op.<plugin>.<target> and orrery.describe.<plugin>.<target> subjects (gen-nkeys.py --satellite/--leaf NAME=PLUGIN:TARGET,... --helm-values), or opt in with satellite.everyTarget=true" (toString $u.nkey) $subj) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq (toString $u.nkey) "<< $ORRERY_NKEY_SATELLITE >>" -}}
{{- $allow := list -}}
{{- with $u.permissions -}}{{- with .subscribe -}}{{- $allow = .allow | default list -}}{{- end -}}{{- end -}}
{{- $targets := $v.satellite.targets | default (list "*") -}}
{{- range $path := $v.satellite.plugins -}}
{{- $plugin := base (toString $path) | trimPrefix "orrery-plugin-" -}}
{{- range $t := $targets -}}
{{- $subject := printf "orrery.op.%s.%s" $plugin $t -}}
{{- if not (or (has $subject $allow) (has (printf "orrery.op.%s.*" $plugin) $allow) (has "orrery.op.>" $allow)) -}}
{{- fail (printf "nats.config.merge: the satellite user may not subscribe to %s, which satellite.plugins and satellite.targets serve: add it to its permissions.subscribe.allow (see values.yaml)" $subject) -}}
{{- end -}}
{{- $describe := printf "orrery.describe.%s.%s" $plugin $t -}}
{{- if not (or (has $describe $allow) (has (printf "orrery.describe.%s.*" $plugin) $allow) (has "orrery.describe.>" $allow)) -}}
{{- fail (printf "nats.config.merge: the satellite user may not subscribe to %s, which satellite.plugins and satellite.targets serve: add it to its permissions.subscribe.allow (see values.yaml)" $describe) -}}
{{- end -}}
{{- if and (eq $t "*") (not (or (has (printf "orrery.describe.%s" $plugin) $allow) (has "orrery.describe.>" $allow))) -}}
{{- fail (printf "nats.config.merge: the satellite user may not subscribe to orrery.describe.%s, which a satellite serving every target answers: add it to its permissions.subscribe.allow" $plugin) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of the PostgreSQL URL Secret and key. */}}
{{- define "orrery.postgresSecretName" -}}
{{- default (printf "%s-postgres" (include "orrery.fullname" .)) .Values.primary.store.postgres.existingSecret -}}
{{- end -}}
{{- define "orrery.postgresSecretKey" -}}
{{- if .Values.primary.store.postgres.existingSecret -}}{{ .Values.primary.store.postgres.existingSecretKey }}{{- else -}}url{{- end -}}
{{- end -}}

{{- define "orrery.hubSecretName" -}}
{{- default (printf "%s-hub-trust" (include "orrery.fullname" .)) .Values.hub.existingSecret -}}
{{- end -}}
{{- define "orrery.hubEnabled" -}}
{{- if or .Values.hub.existingSecret .Values.hub.trustedKeys -}}true{{- end -}}
{{- end -}}

{{/* Volumes shared by the primary and satellite pods: NATS credentials and TLS, as a YAML list (empty string when none). Pass (dict "ctx" $ "role" "primary"). */}}
{{- define "orrery.natsVolumes" -}}
{{- $v := .ctx.Values -}}
{{- $vols := list -}}
{{- if ne $v.natsClient.auth.mode "none" -}}
{{- $file := include "orrery.credFile" . -}}
{{- $vols = append $vols (dict "name" "nats-auth" "secret" (dict "secretName" $v.natsClient.auth.secretName "defaultMode" 288 "items" (list (dict "key" $file "path" $file)))) -}}
{{- end -}}
{{- if eq (include "orrery.natsTls" .ctx) "true" -}}
{{- /* ca.crt only: a client never needs the server's key. */ -}}
{{- $items := list (dict "key" "ca.crt" "path" "ca.crt") -}}
{{- if $v.natsClient.tls.clientCert -}}
{{- $items = concat $items (list (dict "key" "tls.crt" "path" "tls.crt") (dict "key" "tls.key" "path" "tls.key")) -}}
{{- end -}}
{{- $vols = append $vols (dict "name" "nats-tls" "secret" (dict "secretName" (include "orrery.natsTlsSecret" .ctx) "defaultMode" 288 "items" $items)) -}}
{{- end -}}
{{- if $vols }}{{ toYaml $vols }}{{ end -}}
{{- end -}}

{{/* Their mounts (readable by the pod's fsGroup: defaultMode 288 = 0440). */}}
{{- define "orrery.natsVolumeMounts" -}}
{{- $v := .ctx.Values -}}
{{- $mounts := list -}}
{{- if ne $v.natsClient.auth.mode "none" -}}
{{- $mounts = append $mounts (dict "name" "nats-auth" "mountPath" "/etc/orrery/nats-auth" "readOnly" true) -}}
{{- end -}}
{{- if eq (include "orrery.natsTls" .ctx) "true" -}}
{{- $mounts = append $mounts (dict "name" "nats-tls" "mountPath" "/etc/orrery/nats-tls" "readOnly" true) -}}
{{- end -}}
{{- if $mounts }}{{ toYaml $mounts }}{{ end -}}
{{- end -}}
