//go:build tools

// containerd 2 and its runc shim, for the cluster tests (build.sh builds them from this module set).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd/command"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
)
