#!/usr/bin/env bash
# Build, from the pinned module set beside this script (go.mod, go.sum: k8s.io/kubernetes v1.36.3 with its staging
# modules at v0.36.3, all from the Go module proxy), the real Kubernetes components the cluster tests run against.
# Once per machine: the binaries go to a cache keyed by the module set and this script, and later runs reuse them.
#   bash tools/components/build.sh      prints the directory holding them (kubelet)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
out=${GPUHOOK_COMPONENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhook-components}/$key
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$here/go.mod")
if [ ! -x "$out/kubelet" ]; then
  start=$SECONDS
  echo "tools/components/build.sh: building kubelet $version from the module proxy into $out (once per machine)" >&2
  mkdir -p "$out"
  (cd "$here" && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath \
     -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version" -o "$out/kubelet.tmp" \
     k8s.io/kubernetes/cmd/kubelet)
  mv "$out/kubelet.tmp" "$out/kubelet"
  echo "tools/components/build.sh: built in $((SECONDS - start)) s" >&2
fi
echo "$out"
