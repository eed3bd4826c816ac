//go:build tools

// The Kubernetes components the cluster tests run (build.sh builds them from this module set).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/pkg/kubelet"
	_ "k8s.io/kubectl/pkg/cmd"
)
