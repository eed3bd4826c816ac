#!/usr/bin/env bash
# Build, from the pinned module sets beside this script (one go.mod and go.sum per component, every module from the
# Go module proxy), the real components the cluster tests run against:
#   kubernetes/  k8s.io/kubernetes v1.36.3 (its staging modules replaced by v0.36.3): kubelet, kube-apiserver,
#                kube-controller-manager, kube-scheduler, kubectl
#   etcd/        go.etcd.io/etcd/server/v3 v3.7.3: etcd (main.go is the server's entry point, etcdmain.Main)
#   containerd/  github.com/containerd/containerd/v2 v2.4.2: containerd, containerd-shim-runc-v2
#   cri-tools/   sigs.k8s.io/cri-tools v1.37.0: crictl
#   helm/        helm.sh/helm/v3 v3.22.0: helm
#   cri-o/       github.com/cri-o/cri-o v1.36.3: crio, and pinns (C, from the module's own source, with cc)
#   gotemplate/  Go's text/template alone: renders a k3s/RKE2 containerd config template as those distributions do
#   nvidia-ctk/  github.com/NVIDIA/nvidia-container-toolkit v1.20.2: nvidia-container-runtime, nvidia-ctk,
#                nvidia-cdi-hook (with cgo: go-nvml opens libnvidia-ml.so.1 with dlopen), the peer NVIDIA users run
# Once per machine: each component's binaries go to a cache directory keyed by its module set and build flags, and
# later runs reuse them (a change to one component rebuilds that one). GPUHOOK_COMPONENTS_CACHE moves the cache.
#   bash tools/components/build.sh      prints one directory with links to every binary
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUHOOK_COMPONENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhook-components}
export GOFLAGS=-mod=readonly CGO_ENABLED=0
tags="no_btrfs no_devmapper no_zfs"
keys=""

version() { awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$here/$1/go.mod" | head -1; }

# build DIR "LDFLAGS" PACKAGE... : every package's binary, into a directory keyed by DIR's module set and the
# build's flags (so a change to one component rebuilds that one only), unless it is there already; $out names
# that directory afterwards. TAGS= replaces the build tags.
build() {
  local dir=$1 ldflags=$2; shift 2
  local key p tmp start=$SECONDS tags=${TAGS:-$tags}
  key=$(cd "$here/$dir" && { cat go.mod go.sum ./*.go; echo "$tags $ldflags $*"; } | sha256sum | cut -c1-16)
  out=$cache/$dir/$key
  keys="$keys $dir/$key"
  for p in "$@"; do [ -x "$out/$(basename "$p")" ] || break; done
  [ -x "$out/$(basename "$p")" ] && return 0
  echo "tools/components/build.sh: building $dir ($*) into $out (once per machine)" >&2
  mkdir -p "$out"
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  (cd "$here/$dir" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$tmp/" "$@")
  for p in "$@"; do mv "$tmp/$(basename "$p")" "$out/"; done
  rmdir "$tmp"
  echo "tools/components/build.sh: $dir built in $((SECONDS - start)) s" >&2
}

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
build containerd "-X github.com/containerd/containerd/v2/version.Version=$(version containerd github.com/containerd/containerd/v2)" \
  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
build cri-tools "-X sigs.k8s.io/cri-tools/pkg/version.Version=$(version cri-tools sigs.k8s.io/cri-tools)" \
  sigs.k8s.io/cri-tools/cmd/crictl
# helm's idea of the cluster's version (what `helm template` and `helm lint` check kubeVersion against) is its
# client-go's, as helm's own Makefile sets it
hv=helm.sh/helm/v3
helm_k8s_minor=$(version helm k8s.io/client-go | cut -d. -f2)
build helm "-X $hv/internal/version.version=$(version helm $hv) -X $hv/pkg/chartutil.k8sVersionMajor=1
  -X $hv/pkg/chartutil.k8sVersionMinor=$helm_k8s_minor -X $hv/pkg/lint/rules.k8sVersionMajor=1
  -X $hv/pkg/lint/rules.k8sVersionMinor=$helm_k8s_minor" $hv/cmd/helm
k8s=$(version kubernetes k8s.io/kubernetes)
kv=k8s.io/component-base/version
build kubernetes "-X $kv.gitVersion=$k8s -X $kv.gitMajor=1 -X $kv.gitMinor=$(echo "$k8s" | cut -d. -f2) -X $kv.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl

# one directory with every binary (links into the components' own)
set_dir=$cache/sets/$(echo "$keys" | sha256sum | cut -c1-16)
if [ ! -d "$set_dir" ]; then
  mkdir -p "$cache/sets"
  tmp=$(mktemp -d "$cache/sets/.set.XXXXXX")
  for k in $keys; do for f in "$cache/$k"/*; do ln -s "$f" "$tmp/"; done; done
  mv -T "$tmp" "$set_dir"
fi
echo "$set_dir"
