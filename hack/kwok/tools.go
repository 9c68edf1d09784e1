//go:build tools

// Package tools pins KWOK (sigs.k8s.io/kwok), the SIG Scheduling simulator of nodes and pod
// lifecycles that the dev cluster can run next to kube-scheduler (see build-tool.sh kwok).
// KWOK v0.8.0 is built against k8s.io/* v0.36 and needs Go 1.26, so it cannot share
// hack/controlplane's module (k8s 1.34.4, every staging module replaced to v0.34.4).
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
