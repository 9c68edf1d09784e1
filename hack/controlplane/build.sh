#!/usr/bin/env bash
# Build (or reuse) the control-plane binaries Tessera tests against.
#
# Prints the directory holding etcd, kube-apiserver, kube-controller-manager
# and kubectl. Binaries are cached outside the repository, keyed by the
# versions pinned in go.mod, so a second run costs nothing; builds running
# at once share one build (hack/cache.sh). Set
# TESSERA_CONTROLPLANE_BIN (or KUBEBUILDER_ASSETS) to a directory of prebuilt
# binaries to skip the build entirely.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins=(etcd kube-apiserver kube-controller-manager kubectl)

has_all() {
  local d="$1"
  for b in "${bins[@]}"; do [[ -x "$d/$b" ]] || return 1; done
}

for preset in "${TESSERA_CONTROLPLANE_BIN:-}" "${KUBEBUILDER_ASSETS:-}"; do
  if [[ -n "$preset" ]]; then
    if has_all "$preset"; then echo "$preset"; exit 0; fi
    echo "build.sh: $preset lacks one of: ${bins[*]}" >&2; exit 1
  fi
done

k8s_version="$(awk '$1=="k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3" {print $2; exit}' "$here/go.mod")"
go_version="$(go env GOVERSION)"
out="${XDG_CACHE_HOME:-$HOME/.cache}/tessera/controlplane/k8s-${k8s_version}-etcd-${etcd_version}-${go_version}"

minor="$(echo "$k8s_version" | cut -d. -f2)"
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

build() {
  local start=$SECONDS
  echo "build.sh: building Kubernetes $k8s_version and etcd $etcd_version into $out (cold: 10 to 20 min on 2 cores)" >&2
  # errexit does not apply inside a function called as a condition, hence the && and ||
  (
    cd "$here" &&
      export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" &&
      go build -ldflags "$ldflags" -o "$1/" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kubectl &&
      go build -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3
  ) || return 1
  echo "build.sh: built in $((SECONDS - start))s" >&2
}

# shellcheck source=hack/cache.sh
source "$here/../cache.sh"
cache_build "$out" has_all build
echo "$out"
