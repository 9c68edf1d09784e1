#!/usr/bin/env bash
# Build (or reuse) the control-plane binaries Tessera tests against.
#
# Prints the directory holding etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl. Binaries are cached outside the repository, keyed
# by the versions pinned in go.mod, the Go version and the list of binaries, so
# a second run costs nothing; builds running at once share one build
# (hack/cache.sh). A new entry takes (hard-links) the binaries it can from an
# entry of the same versions with fewer binaries and builds only the others.
# Set TESSERA_CONTROLPLANE_BIN (or KUBEBUILDER_ASSETS) to a directory of
# prebuilt binaries to skip the build entirely.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

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
versions="k8s-${k8s_version}-etcd-${etcd_version}-${go_version}"
# The list of binaries is part of the key: an entry, once complete, is never touched again (readers
# hold no lock), so adding a binary makes a new entry rather than growing one in use.
set_key="$(printf '%s\n' "${bins[@]}" | sha256sum | cut -c1-8)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tessera/controlplane"
out="$cache/$versions-$set_key"

minor="$(echo "$k8s_version" | cut -d. -f2)"
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

# Prints what BIN reports as its version (etcd and kubectl ask differently).
version_of() {
  case "${1##*/}" in
    etcd) "$1" --version ;;
    kubectl) "$1" version --client ;;
    *) "$1" --version ;;
  esac 2>/dev/null
}

# Hard-link (else copy) into DIR each binary that an entry of the same versions already holds
# and that runs and reports the pinned version; entries are complete and immutable once renamed
# into place, and the version check also refuses a binary left half-written by an older script.
seed() {
  local dir="$1" b src want
  for b in "${bins[@]}"; do
    want="${k8s_version#v}"
    [[ "$b" == etcd ]] && want="${etcd_version#v}"
    for src in "$cache/$versions" "$cache/$versions"-*; do
      [[ "$src" == *.tmp.* || "$src" == *.stale.* || "$src" == *.lock ]] && continue
      [[ -x "$src/$b" ]] || continue
      [[ "$(version_of "$src/$b")" == *"$want"* ]] || continue
      if ln "$src/$b" "$dir/$b" 2>/dev/null || cp "$src/$b" "$dir/$b"; then
        echo "build.sh: reusing $b from $src" >&2
        break
      fi
    done
  done
}

build() {
  local start=$SECONDS b k8s_pkgs=() missing=()
  seed "$1"
  for b in "${bins[@]}"; do
    [[ -x "$1/$b" ]] && continue
    missing+=("$b")
    [[ "$b" == etcd ]] || k8s_pkgs+=("k8s.io/kubernetes/cmd/$b")
  done
  echo "build.sh: building ${missing[*]} (Kubernetes $k8s_version, etcd $etcd_version) into $out" \
    "(cold, all of them: 10 to 20 min on 2 cores)" >&2
  # errexit does not apply inside a function called as a condition, hence the && and ||
  (
    cd "$here" &&
      export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" &&
      { [[ ${#k8s_pkgs[@]} -eq 0 ]] || go build -ldflags "$ldflags" -o "$1/" "${k8s_pkgs[@]}"; } &&
      { [[ -x "$1/etcd" ]] || go build -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3; }
  ) || return 1
  echo "build.sh: built in $((SECONDS - start))s" >&2
}

# shellcheck source=hack/cache.sh
source "$here/../cache.sh"
cache_build "$out" has_all build
echo "$out"
