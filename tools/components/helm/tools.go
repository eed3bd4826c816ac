//go:build tools

// helm, for the chart's tests (build.sh builds it from this module set).
package tools

import _ "helm.sh/helm/v3/pkg/action"
