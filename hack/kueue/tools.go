//go:build tools

// Package tools pins Kueue (sigs.k8s.io/kueue), the SIG Scheduling job queueing controller that
// TenantQuota can enforce through (spec.enforcement: Kueue; see build-tool.sh kueue). Kueue
// v0.17.0 is built against k8s.io/* v0.35 and controller-runtime v0.23, so it cannot share
// hack/controlplane's module (k8s 1.34.4, every staging module replaced to v0.34.4).
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
