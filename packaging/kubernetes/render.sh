#!/usr/bin/env bash
# daemonset.yaml (and daemonset-dra.yaml, with the DRA driver) is the Helm chart (packaging/helm/gpuhook) rendered with its defaults, as release "gpuhook" in
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
{
  echo "# gpuhook on every GPU node with the DRA driver in place of the device plugin (Kubernetes 1.34+, an engine with"
  echo "# CDI), for kubectl apply: the Helm chart rendered by packaging/kubernetes/render.sh with dra.enabled=true and"
  echo "# devicePlugin.enabled=false; do not edit, change the chart. It holds the driver's RBAC and DeviceClasses."
  "$helm" template gpuhook packaging/helm/gpuhook --namespace kube-system --set runtimeClass.enabled=false \
    --set dra.enabled=true --set devicePlugin.enabled=false
} > packaging/kubernetes/daemonset-dra.yaml
