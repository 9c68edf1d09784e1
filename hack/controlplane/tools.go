//go:build tools

// Package tools pins the control-plane binaries Tessera's integration tests
// and demo run: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
// and kubectl, all built from Go modules with plain `go build` (see build.sh).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
