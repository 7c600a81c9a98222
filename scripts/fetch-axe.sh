#!/usr/bin/env bash
# Fetches axe-core (the accessibility rules engine the dashboard's browser test runs) from
# the npm registry into the build cache, once: $HOME/.cache/docket/axe/axe.min.js, or
# $DOCKET_AXE_JS when set. The version is pinned so a result means the same rules each run.
set -euo pipefail
version=4.10.3
dest="${DOCKET_AXE_JS:-${XDG_CACHE_HOME:-$HOME/.cache}/docket/axe/axe.min.js}"
if [ -s "$dest" ] && grep -q "axe v$version" "$dest" 2>/dev/null; then
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The registry's tarball over HTTPS (no npm needed); npm pack when curl is missing.
if command -v curl >/dev/null 2>&1; then
  curl -fsSL "https://registry.npmjs.org/axe-core/-/axe-core-$version.tgz" -o "$dir/axe.tgz"
else
  (cd "$dir" && npm pack --silent "axe-core@$version" >/dev/null && mv "axe-core-$version.tgz" axe.tgz)
fi
tar xzf "$dir/axe.tgz" -C "$dir"
mkdir -p "$(dirname "$dest")"
cp "$dir/package/axe.min.js" "$dest"
echo "axe-core $version: $dest" >&2
