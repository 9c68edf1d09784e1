# Sourced by hack/build-tool.sh and hack/controlplane/build.sh: fill one cache entry (a folder
# of binaries) so that builds running at once neither clobber each other nor pull a folder from
# under a process that uses it.
#
#   cache_build OUT COMPLETE BUILD
#     OUT       the cache entry, e.g. ~/.cache/tessera/tools/helm-<key>-go1.26.8
#     COMPLETE  a function; `COMPLETE DIR` succeeds when DIR holds every binary
#     BUILD     a function; `BUILD DIR` writes the binaries into DIR (an empty private folder)
#
# A complete entry is never touched again, so readers need no lock. Builders take an exclusive
# flock on OUT.lock and look again once they hold it (whoever held it may have filled the entry
# meanwhile); the build writes into a private mktemp folder next to OUT, which is renamed into
# place only when complete (one rename(2): readers see no entry or a whole one). Holding the lock,
# leftovers of killed builds (OUT.tmp.*) and an incomplete OUT are set aside and removed: no
# other builder runs, and no reader uses an incomplete entry.

cache_build() {
  local out="$1" complete="$2" build="$3" lock tmp
  if "$complete" "$out"; then return 0; fi
  mkdir -p "$(dirname "$out")"
  if command -v flock >/dev/null; then
    exec {lock}>"$out.lock"
    if ! flock -n "$lock"; then
      echo "${0##*/}: waiting for another build into $out to finish" >&2
      flock "$lock"
    fi
    if "$complete" "$out"; then return 0; fi  # built while we waited
    rm -rf "$out".tmp.* "$out".stale.*
    if [[ -e "$out" ]]; then  # an interrupted build of an older script: nobody can use it
      mv -T "$out" "$(mktemp -d "$out.stale.XXXXXX")" && rm -rf "$out".stale.*
    fi
  fi  # without flock (util-linux) builds at once each build, and the first rename wins
  tmp="$(mktemp -d "$out.tmp.XXXXXX")"
  if ! "$build" "$tmp"; then
    rm -rf "$tmp"
    return 1
  fi
  if ! "$complete" "$tmp"; then
    echo "${0##*/}: the build left $tmp without every binary" >&2
    rm -rf "$tmp"
    return 1
  fi
  if ! mv -T "$tmp" "$out"; then  # a builder without the lock won the race: keep its entry
    rm -rf "$tmp"
    "$complete" "$out"
  fi
}
