#!/usr/bin/env bash
# Build, from the pinned module sets beside this script (one go.mod and go.sum per component, every module from the
# Go module proxy), the real components the cluster tests run against:
#   kubernetes/  k8s.io/kubernetes v1.36.3 (its staging modules replaced by v0.36.3): kubelet, kube-apiserver,
#                kube-controller-manager, kube-scheduler, kubectl
#   kubernetes-1.34/, kubernetes-1.37/  k8s.io/kubernetes v1.34.4 and v1.37.2 (staging v0.34.4, v0.37.2): kubelet,
#                kube-apiserver, kube-controller-manager, kube-scheduler, only when asked for (kubectl is 1.36's,
#                within the one minor version of skew kubectl supports)
#   etcd/        go.etcd.io/etcd/server/v3 v3.7.3: etcd (main.go is the server's entry point, etcdmain.Main)
#   containerd/  github.com/containerd/containerd/v2 v2.4.2: containerd, containerd-shim-runc-v2
#   cri-tools/   sigs.k8s.io/cri-tools v1.37.0: crictl
#   helm/        helm.sh/helm/v3 v3.22.0: helm
#   cri-o/       github.com/cri-o/cri-o v1.36.3: crio, and pinns (C, from the module's own source, with cc)
#   gotemplate/  Go's text/template alone: renders a k3s/RKE2 containerd config template as those distributions do
#   nvidia-ctk/  github.com/NVIDIA/nvidia-container-toolkit v1.20.2: nvidia-container-runtime, nvidia-ctk,
#                nvidia-cdi-hook (with cgo: go-nvml opens libnvidia-ml.so.1 with dlopen), the peer NVIDIA users run
#   docker-28/   github.com/docker/docker v28.5.2+incompatible (no go.mod: its vendor.mod's pins): dockerd, docker-proxy
#   docker-29/   github.com/moby/moby/v2 v2.0.0-beta.24 (Docker 29.8's engine): dockerd, docker-proxy
#   docker-cli/  github.com/docker/cli v29.10.0+incompatible (no go.mod: its vendor.mod's pins): docker
#                (the three only when asked for, with containerd, by the e2e tier: build.sh docker-28 | docker-29)
# Once per machine: each component's binaries go to a cache directory keyed by its module set and build flags, and
# later runs reuse them (a change to one component rebuilds that one). GPUHOOK_COMPONENTS_CACHE moves the cache.
# One build of a component at a time (a lock in its directory): a second run waits for it, then finds it built.
#   bash tools/components/build.sh        prints one directory with links to every binary
#   bash tools/components/build.sh 1.34   the same, with that version's Kubernetes binaries in place of 1.36's
#   bash tools/components/build.sh docker-29   one directory with that Docker's dockerd, docker-proxy and docker
#                (the CLI), containerd and containerd-shim-runc-v2, and nothing of the cluster's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUHOOK_COMPONENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhook-components}
other=${1:-}
docker=""
case $other in docker-*) docker=$other; other="" ;; esac
if [ -n "$docker" ] && [ ! -f "$here/$docker/go.mod" ]; then
  echo "tools/components/build.sh: no module set for $docker (tools/components/$docker)" >&2
  exit 2
fi
if [ -n "$other" ] && [ ! -f "$here/kubernetes-$other/go.mod" ]; then
  echo "tools/components/build.sh: no module set for Kubernetes $other (tools/components/kubernetes-$other)" >&2
  exit 2
fi
export GOFLAGS=-mod=readonly CGO_ENABLED=0
tags="no_btrfs no_devmapper no_zfs"
keys=""

version() { awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/$1/go.mod" | head -1; }

# build DIR "LDFLAGS" PACKAGE... : every package's binary, into a directory keyed by DIR's module set and the
# build's flags (so a change to one component rebuilds that one only), unless it is there already; $out names
# that directory afterwards. TAGS= replaces the build tags; GCFLAGS= adds -gcflags.
build() {
  local dir=$1 ldflags=$2; shift 2
  local key p tmp start=$SECONDS tags=${TAGS:-$tags}
  key=$(cd "$here/$dir" && { cat go.mod go.sum ./*.go; echo "$tags $ldflags $*${GCFLAGS:+ $GCFLAGS}"; } |
    sha256sum | cut -c1-16)
  out=$cache/$dir/$key
  keys="$keys $dir/$key"
  built "$@" && return 0
  mkdir -p "$out"
  exec 9>"$out/.lock"
  flock 9  # another run building it: wait, and find it built
  if ! built "$@"; then
    echo "tools/components/build.sh: building $dir ($*) into $out (once per machine)" >&2
    tmp=$(mktemp -d "$out/.build.XXXXXX")
    (cd "$here/$dir" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" ${GCFLAGS:+-gcflags "$GCFLAGS"} \
      -o "$tmp/" "$@")
    for p in "$@"; do mv "$tmp/$(basename "$p")" "$out/"; done
    rmdir "$tmp"
    echo "tools/components/build.sh: $dir built in $((SECONDS - start)) s" >&2
  fi
  exec 9>&-
}
built() { local p; for p in "$@"; do [ -x "$out/$(basename "$p")" ] || return 1; done; }

# one directory with every binary built so far (links into the components' own); prints it
link_set() {
  local set_dir k f tmp
  set_dir=$cache/sets/$(echo "$keys" | sha256sum | cut -c1-16)
  if [ ! -d "$set_dir" ]; then
    mkdir -p "$cache/sets"
    tmp=$(mktemp -d "$cache/sets/.set.XXXXXX")
    for k in $keys; do for f in "$cache/$k"/*; do ln -sfn "$f" "$tmp/"; done; done
    mv -T "$tmp" "$set_dir"
  fi
  echo "$set_dir"
}

build_containerd() {
  build containerd "-X github.com/containerd/containerd/v2/version.Version=$(version containerd github.com/containerd/containerd/v2)" \
    github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
}

if [ -n "$docker" ]; then
  # Docker as its release builds it (hack/make.sh's static tags, the version it reports), without cgo and the
  # btrfs, devicemapper and zfs storage; no embedded containerd (Docker 29's experiment): it starts containerd from
  # its PATH
  docker_tags="netgo osusergo static_build nri_no_wasm no_embedded_containerd no_btrfs no_devmapper no_zfs"
  docker_tags="$docker_tags exclude_graphdriver_btrfs exclude_graphdriver_devicemapper exclude_graphdriver_zfs"
  case $docker in
    docker-28) engine=github.com/docker/docker
      engine_version=$(version docker-28 $engine | sed 's/^v//; s/+incompatible$//') ;;
    # the release this module version is (its releases/versions.yaml: last 29.8.0, next 29.8.1)
    docker-29) engine=github.com/moby/moby/v2; engine_version=29.8.1 ;;
  esac
  TAGS=$docker_tags build "$docker" \
    "-X $engine/dockerversion.Version=$engine_version -X $engine/dockerversion.GitCommit=$(version "$docker" $engine)" \
    $engine/cmd/dockerd $engine/cmd/docker-proxy
  # a module without go.mod is compiled as Go 1.16 (-lang=go1.16), which the CLI's newer files are not: its own
  # vendor.mod's Go, as its release builds (in GOPATH mode) compile it
  cli=github.com/docker/cli
  GCFLAGS="$cli/...=-lang=go$(awk '$1 == "go" {split($2, v, "."); print v[1] "." v[2]}' "$here/docker-cli/go.mod")" \
    TAGS="osusergo netgo static_build" build docker-cli \
    "-X $cli/cli/version.Version=$(version docker-cli $cli | sed 's/^v//; s/+incompatible$//')" $cli/cmd/docker
  build_containerd
  link_set
  exit 0
fi

build etcd "" gpuhook.dev/tests/components/etcd
build gotemplate "" gpuhook.dev/tests/components/gotemplate
nv=github.com/NVIDIA/nvidia-container-toolkit
CGO_ENABLED=1 build nvidia-ctk "-X $nv/internal/info.version=$(version nvidia-ctk $nv)" \
  $nv/cmd/nvidia-container-runtime $nv/cmd/nvidia-ctk $nv/cmd/nvidia-cdi-hook
# CRI-O without cgo: image signatures through the pure Go openpgp, no ostree, btrfs or devicemapper storage
TAGS="containers_image_openpgp containers_image_ostree_stub exclude_graphdriver_btrfs exclude_graphdriver_devicemapper" \
  build cri-o "" github.com/cri-o/cri-o/cmd/crio
if [ ! -x "$out/pinns" ]; then  # as its Makefile builds it: static, from the module's pinns/src
  src=$(cd "$here/cri-o" && go list -m -f '{{.Dir}}' github.com/cri-o/cri-o)
  cc -std=c99 -Os -O3 -Wall -Wextra -static -s -o "$out/.pinns.tmp" "$src"/pinns/src/*.c
  mv "$out/.pinns.tmp" "$out/pinns"
fi
build_containerd
build cri-tools "-X sigs.k8s.io/cri-tools/pkg/version.Version=$(version cri-tools sigs.k8s.io/cri-tools)" \
  sigs.k8s.io/cri-tools/cmd/crictl
# helm's idea of the cluster's version (what `helm template` and `helm lint` check kubeVersion against) is its
# client-go's, as helm's own Makefile sets it
hv=helm.sh/helm/v3
helm_k8s_minor=$(version helm k8s.io/client-go | cut -d. -f2)
build helm "-X $hv/internal/version.version=$(version helm $hv) -X $hv/pkg/chartutil.k8sVersionMajor=1
  -X $hv/pkg/chartutil.k8sVersionMinor=$helm_k8s_minor -X $hv/pkg/lint/rules.k8sVersionMajor=1
  -X $hv/pkg/lint/rules.k8sVersionMinor=$helm_k8s_minor" $hv/cmd/helm
# kube DIR PACKAGE...: Kubernetes' binaries, with the version they report set as its release builds set it
kube() {
  local dir=$1 k8s kv=k8s.io/component-base/version; shift
  k8s=$(version "$dir" k8s.io/kubernetes)
  build "$dir" "-X $kv.gitVersion=$k8s -X $kv.gitMajor=1 -X $kv.gitMinor=$(echo "$k8s" | cut -d. -f2) -X $kv.gitTreeState=clean" "$@"
}
servers="k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler"
# shellcheck disable=SC2086
kube kubernetes $servers k8s.io/kubernetes/cmd/kubectl
# shellcheck disable=SC2086
[ -z "$other" ] || kube "kubernetes-$other" $servers  # after 1.36's: its links replace theirs

link_set
