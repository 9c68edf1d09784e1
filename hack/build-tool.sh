#!/usr/bin/env bash
# Build (or reuse) a Go tool the tests use, pinned by its own go.mod under hack/<tool>/.
#
#   hack/build-tool.sh kstatus   the kstatus checker (hack/kstatus, sigs.k8s.io/cli-utils)
#   hack/build-tool.sh helm      the Helm CLI (hack/helm, helm.sh/helm/v3)
#   hack/build-tool.sh kwok      the KWOK controller (hack/kwok, sigs.k8s.io/kwok), and next to
#                                it kwok-stages.yaml: the stages kwokctl gives it by default
#   hack/build-tool.sh kueue     Kueue's controller manager (hack/kueue, sigs.k8s.io/kueue), and
#                                next to it kueue-crds/ and kueue-webhooks.yaml: its CRDs and
#                                webhook configurations, as the module ships them
#
# Prints the path of the binary. Binaries are cached outside the repository, keyed by the
# tool's go.sum and main sources and the Go version, so a second run costs nothing. Builds
# running at once share one build (hack/cache.sh).
set -euo pipefail

tool="${1:?usage: hack/build-tool.sh kstatus|helm|kwok|kueue}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/$tool"
stages=()  # files of the tool's module copied next to the binary (kustomize/stage/<name>.yaml)
manifests=false  # kueue: its CRDs and webhook configurations copied next to the binary
toolchain=local
case "$tool" in
  kstatus) pkg=. ;;
  helm) pkg=helm.sh/helm/v3/cmd/helm ;;
  kwok)
    pkg=sigs.k8s.io/kwok/cmd/kwok
    toolchain=auto  # v0.8.0 needs Go 1.26: an older Go (>= 1.21) fetches it, as `go` itself would
    # The controller has no stages of its own: kwokctl writes these into its config by default.
    stages=(node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease
      pod/fast/pod-ready pod/fast/pod-complete)
    ;;
  kueue)
    pkg=sigs.k8s.io/kueue/cmd/kueue
    manifests=true
    ;;
  *) echo "build-tool.sh: unknown tool $tool" >&2; exit 2 ;;
esac

key="$({
  cat "$src"/go.mod "$src"/go.sum "$src"/*.go
  [[ ${#stages[@]} -eq 0 ]] || printf '%s\n' "${stages[@]}"
  [[ $manifests == false ]] || echo manifests
} | sha256sum | cut -c1-12)"
goversion="$(cd "$src" && GOTOOLCHAIN=$toolchain go env GOVERSION)"
out="${XDG_CACHE_HOME:-$HOME/.cache}/tessera/tools/$tool-$key-$goversion"

complete() {
  [[ -x "$1/$tool" ]] && { [[ ${#stages[@]} -eq 0 ]] || [[ -s "$1/$tool-stages.yaml" ]]; } &&
    { [[ $manifests == false ]] || { [[ -s "$1/$tool-webhooks.yaml" ]] && [[ -d "$1/$tool-crds" ]]; }; }
}
copy_stages() {
  local dir s
  [[ ${#stages[@]} -eq 0 ]] && return 0
  dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)" || return 1
  for s in "${stages[@]}"; do
    { cat "$dir/kustomize/stage/$s.yaml" && echo "---"; } || return 1
  done >"$1/$tool-stages.yaml"
}
copy_manifests() {
  local dir
  [[ $manifests == false ]] && return 0
  dir="$(go list -m -f '{{.Dir}}' "${pkg%%/cmd/*}")" || return 1
  mkdir -p "$1/$tool-crds" &&
    cp "$dir"/config/components/crd/bases/*.yaml "$1/$tool-crds/" &&
    cp "$dir/config/components/webhook/manifests.yaml" "$1/$tool-webhooks.yaml"
}
build() {
  local start=$SECONDS
  echo "build-tool.sh: building $tool into $out" >&2
  # errexit does not apply inside a function called as a condition, hence the && and ||
  (
    cd "$src" &&
      export GOTOOLCHAIN=$toolchain CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" &&
      nice -n 19 go build -ldflags "-s -w" -o "$1/$tool" "$pkg" &&
      copy_stages "$1" &&
      copy_manifests "$1"
  ) || return 1
  echo "build-tool.sh: built $tool in $((SECONDS - start))s" >&2
}

# shellcheck source=hack/cache.sh
source "$here/cache.sh"
cache_build "$out" complete build
echo "$out/$tool"
