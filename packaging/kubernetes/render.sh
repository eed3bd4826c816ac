#!/usr/bin/env bash
# daemonset.yaml is the Helm chart (packaging/helm/gpuhook) rendered with its defaults, as release "gpuhook" in
# kube-system, without the RuntimeClass (runtimeclass.yaml beside it): one source for both ways to install.
# After changing the chart: bash packaging/kubernetes/render.sh (helm from tools/components/build.sh, or HELM=...).
set -euo pipefail
cd "$(dirname "$0")/../.."
helm=${HELM:-$(bash tools/components/build.sh)/helm}
{
  echo "# gpuhook on every GPU node, for kubectl apply: the Helm chart (packaging/helm/gpuhook) rendered with its"
  echo "# defaults by packaging/kubernetes/render.sh; do not edit, change the chart. The image: Dockerfile.installer."
  "$helm" template gpuhook packaging/helm/gpuhook --namespace kube-system --set runtimeClass.enabled=false
} > packaging/kubernetes/daemonset.yaml
