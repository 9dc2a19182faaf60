#!/bin/sh
# kubectl against `podledger serve` (started with: podledger serve --listen 127.0.0.1:8001).
# SERVE_URL names it; SERVE_TOKEN is its bearer token, if it has one. AT, an RFC 3339 time, shows the
# pods as they were then. KUBECTL picks the kubectl binary (default: kubectl on PATH).
set -eu
SERVE_URL=${SERVE_URL:-http://127.0.0.1:8001}
KUBECTL=${KUBECTL:-kubectl}
config=$(mktemp)
trap 'rm -rf "$config" "$config.cache"' EXIT
cat > "$config" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: ledger, cluster: {server: "$SERVE_URL"}}]
users: [{name: reader, user: {token: "${SERVE_TOKEN:-}"}}]
contexts: [{name: ledger, context: {cluster: ledger, user: reader}}]
current-context: ledger
YAML
k() { "$KUBECTL" --kubeconfig "$config" --cache-dir "${config}.cache" "$@"; }

k get pods -A                      # every pod, as kubectl shows an apiserver's
k get pods -A -o json              # the Pod objects: the desired pod joined with its newest status
timeout "${WATCH_S:-5}" "$KUBECTL" --kubeconfig "$config" --cache-dir "${config}.cache" \
  get pods -A -w --output-watch-events || true   # each change as it happens (Ctrl-C ends it)
if [ -n "${AT:-}" ]; then
  k --server "$SERVE_URL/at/$AT" get pods -A   # the pods as they were at $AT
fi
