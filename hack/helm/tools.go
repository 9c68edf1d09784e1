//go:build tools

// Package tools pins the Helm CLI the test suite renders deploy/helm/tessera with.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
