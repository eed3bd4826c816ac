//go:build tools

// The Kubernetes v1.37.2 components the cluster tests run (build.sh builds them from this module set); kubectl is
// kubernetes/'s, within the version skew kubectl supports.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/pkg/kubelet"
)
