//go:build tools

// NVIDIA's container toolkit for the tests and the benchmark, from the pinned module: its runtime in CDI mode, the
// nvidia-ctk that writes NVIDIA's own CDI spec, and the nvidia-cdi-hook that spec's hooks run. Built by path
// (tools/components/build.sh); this file only keeps them in the module set.
package tools

import (
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk"
)
