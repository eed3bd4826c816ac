//go:build tools

// CRI-O for the cluster tests: build.sh builds github.com/cri-o/cri-o/cmd/crio from this module set (a main package,
// so nothing here imports it; the go.sum holds what it needs), and pinns, CRI-O's small C helper, from the same
// module's source.
package tools
