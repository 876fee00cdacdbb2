#!/bin/sh
# Helper for deploy/Dockerfile: caches the compiled dependencies in their own
# image layer, for a single crate or a Cargo workspace alike.
#
#   cargo-skeleton.sh skeleton DEST   (in /src, the full sources) copy what
#       decides the dependency build (every Cargo.toml, Cargo.lock, .cargo/,
#       vendor/, rust-toolchain*) to DEST and give every target an empty
#       stand-in source file. DEST changes only when those files change, so
#       the layer built from it stays cached across source edits.
#   cargo-skeleton.sh build-deps [ARGS]   (on the skeleton) cargo build --release
#       --locked ARGS, --offline when vendor/ is present (nothing is downloaded then).
#       ARGS select packages and features (the Dockerfile: the gateway without
#       its `demo` feature, and the demo server's own binary).
#   cargo-skeleton.sh build [ARGS]   (on the full sources) the same build, after
#       marking every source newer than the stand-ins: COPY keeps the files'
#       own modification times, which may be older than the stand-in build,
#       and cargo would then keep the stand-in artifacts.
#
# Targets are listed by `cargo metadata --no-deps`, which reads manifests only
# and needs no network.
set -eu

offline_flag() {
  if [ -d vendor ]; then echo --offline; fi
}

# One JSON string field of `cargo metadata --no-deps` output, one per line.
# Paths and crate names carry no quote or backslash, which keeps this a grep.
metadata_field() {
  # shellcheck disable=SC2046  # the flag is one word or none
  cargo metadata --no-deps --format-version 1 --locked $(offline_flag) |
    grep -o "\"$1\":\"[^\"]*\"" | cut -d'"' -f4
}

skeleton() {
  dest=$1
  root=$(pwd)
  mkdir -p "$dest"
  for f in Cargo.lock rust-toolchain rust-toolchain.toml .cargo vendor; do
    if [ -e "$f" ]; then cp -a "$f" "$dest/"; fi
  done
  { echo "$root/Cargo.toml"; metadata_field manifest_path; } | sort -u | while read -r manifest; do
    rel=${manifest#"$root"/}
    mkdir -p "$dest/$(dirname "$rel")"
    cp "$manifest" "$dest/$rel"
  done
  metadata_field src_path | sort -u | while read -r src; do
    rel=${src#"$root"/}
    mkdir -p "$dest/$(dirname "$rel")"
    # Valid as a library, a binary, a build script, a bench or a test.
    echo 'fn main() {}' >"$dest/$rel"
  done
  mkdir -p "$dest/deploy"
  cp "$0" "$dest/deploy/cargo-skeleton.sh"
  # Same content, same files: fixed times keep the layer cached for builders
  # that hash modification times too.
  find "$dest" -exec touch -h -d @0 {} +
}

build_deps() {
  # shellcheck disable=SC2046  # the flag is one word or none
  cargo build --release --locked $(offline_flag) "$@"
}

build() {
  find . \( -path ./target -o -path ./vendor \) -prune -o -type f -exec touch {} +
  build_deps "$@"
}

case "${1:-}" in
  skeleton) skeleton "$2" ;;
  build-deps) shift; build_deps "$@" ;;
  build) shift; build "$@" ;;
  *) echo "usage: $0 skeleton DEST | build-deps [CARGO ARGS] | build [CARGO ARGS]" >&2; exit 2 ;;
esac
