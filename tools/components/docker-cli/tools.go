//go:build tools

// The docker CLI for the e2e tests of Docker 28 and 29 (tests/e2e/test_docker_modern.py): github.com/docker/cli,
// whose module has no go.mod (go.mod here pins what its vendor.mod pins). Built by path (tools/components/build.sh
// docker-28 | docker-29); this file only keeps it in the module set.
package tools

import _ "github.com/docker/cli/cmd/docker"
