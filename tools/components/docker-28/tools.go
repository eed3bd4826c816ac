//go:build tools

// Docker 28's daemon for the e2e tests (tests/e2e/test_docker_modern.py): github.com/docker/docker v28.5.2, whose
// module has no go.mod (go.mod here pins what its vendor.mod pins). Built by path (tools/components/build.sh
// docker-28); this file only keeps it in the module set.
package tools

import (
	_ "github.com/docker/docker/cmd/docker-proxy"
	_ "github.com/docker/docker/cmd/dockerd"
)
