//go:build tools

// crictl, for the cluster tests (build.sh builds it from this module set).
package tools

import _ "sigs.k8s.io/cri-tools/pkg/framework"
