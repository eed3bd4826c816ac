//go:build tools

// Docker 29's daemon for the e2e tests (tests/e2e/test_docker_modern.py): the Go module github.com/moby/moby/v2
// (v2.0.0-beta.*, the module Docker 29's engine is released from). Built by path (tools/components/build.sh
// docker); this file only keeps it in the module set.
package tools

import (
	_ "github.com/moby/moby/v2/cmd/docker-proxy"
	_ "github.com/moby/moby/v2/cmd/dockerd"
)
