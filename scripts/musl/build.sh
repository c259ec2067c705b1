#!/usr/bin/env bash
# Builds for x86_64-unknown-linux-musl with Rust from Debian bookworm's registry only (rustc-web, cargo-web,
# rust-web-src: Rust 1.96), no rustup. Debian ships Rust's std for the host only; the musl std is compiled
# from rust-web-src with cargo's -Zbuild-std (RUSTC_BOOTSTRAP=1 lets a stable rustc take that unstable flag;
# the std's own crates.io dependencies are fetched like any other). C code (ring, the bundled SQLite) is
# compiled, and everything linked, by musl-gcc (musl-tools). No self-contained crt objects exist in Debian's
# rust: -C link-self-contained=no makes rustc use musl-gcc's (Debian musl 1.2.3's crt1.o, libc.a).
#
#   scripts/musl/build.sh addon [--release]   flowguard.linux-x64-musl.node in the repository root: the file
#       binding.js loads on musl. A cdylib dynamically linked to musl libc (-crt-static, as napi-rs does for
#       musl: a .node with its own static libc inside Node's process would be a second libc), NEEDED only
#       libc.so and libgcc_s.so.1 (Rust's musl std unwinds with libgcc_s when not static; linked against
#       $MUSL_ENV/link's musl copy). Target dir: target/musl.
#   scripts/musl/build.sh server [--release]  flowguard-server, fully static (+crt-static: no interpreter, no
#       NEEDED; LLVM's libunwind.a from $MUSL_ENV/unwind), for an image FROM scratch. Target dir:
#       target/musl-static (the std and every dependency differ with crt-static, so nothing could be shared
#       with the addon's build). Prints the binary's path as its last line.
#
# Each build ends with a readelf check (no glibc loader, no libc.so.6; the server: no interpreter, no
# dynamic section), and fails if it does not hold.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/musl/vars.sh
. "$here/vars.sh"
what="${1:-}"; profile=debug; release=()
[ "${2:-}" = --release ] && { profile=release; release=(--release); }
[ -e "$MUSL_ENV/.ready-$MUSL_LAYOUT" ] || "$here/setup.sh"

# Debian's toolchain by its path: rustup's proxies (~/.cargo/bin) may come first on PATH, and /usr/bin/cargo
# runs whatever `rustc` RUSTC names.
RUSTC=/usr/bin/rustc; CARGO=/usr/bin/cargo
for f in "$RUSTC" "$CARGO" /usr/lib/rustlib/src/rust/library/Cargo.lock "$(command -v musl-gcc || echo musl-gcc)"; do
  [ -e "$f" ] || { echo "musl build: $f is missing (apt-get install rustc-web cargo-web rust-web-src musl-tools)" >&2; exit 1; }
done
export RUSTC RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
export CC_x86_64_unknown_linux_musl=musl-gcc CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER=musl-gcc
# Debug builds without debug info: smaller, and quicker to link (the static server is packed
# into an npm package and an image by the proofs); set CARGO_PROFILE_DEV_DEBUG to keep it.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"
T=x86_64-unknown-linux-musl
cargo_build() { # target dir, package, rustflags, [cargo rustc args for the final crate only...]
  local dir="$1" pkg="$2" flags="$3"; shift 3
  echo "musl build: $("$RUSTC" --version), $pkg ($profile) in $dir" >&2
  local cmd=(build); [ $# -gt 0 ] && cmd=(rustc)
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="$flags" \
    "$CARGO" "${cmd[@]}" --locked -Zbuild-std --target "$T" --target-dir "$dir" -p "$pkg" "${release[@]}" --manifest-path "$root/Cargo.toml" "$@"
}
no_glibc() {
  if readelf -d "$1" | grep -E 'ld-linux|libc\.so\.6'; then echo "musl build: $1 needs glibc" >&2; exit 1; fi
}

case "$what" in
  addon)
    cargo_build "$root/target/musl" flowguard "-C target-feature=-crt-static -L native=$MUSL_ENV/link -C link-self-contained=no"
    out="$root/flowguard.linux-x64-musl.node"
    cp "$root/target/musl/$T/$profile/libflowguard.so" "$out"
    no_glibc "$out"
    readelf -d "$out" | grep NEEDED >&2
    # Exactly musl's libc and libgcc_s: anything else would be missing on Alpine.
    extra="$(readelf -d "$out" | grep NEEDED | grep -vE '\[(libc\.so|libgcc_s\.so\.1)\]' || true)"
    [ -z "$extra" ] || { echo "musl build: unexpected NEEDED: $extra" >&2; exit 1; }
    echo "musl build: checked $out ($(du -h "$out" | cut -f1))" >&2
    echo "$out"
    ;;
  server)
    # Rust's musl target makes a static PIE by default (-static-pie), which Debian's musl-gcc.specs does not
    # know: it links Scrt1.o and keeps -dynamic-linker, giving a PIE with an interpreter. A non-PIE
    # static executable (-C relocation-model=static: rustc then links with -static -no-pie) is what musl-gcc
    # makes. Only the final crate needs it (the dependencies' default PIC code links into either), so it is
    # passed through `cargo rustc` to that crate alone.
    cargo_build "$root/target/musl-static" flowguard-server "-C target-feature=+crt-static -C link-self-contained=no -L native=$MUSL_ENV/unwind" \
      --bin flowguard-server -- -C relocation-model=static
    out="$root/target/musl-static/$T/$profile/flowguard-server"
    no_glibc "$out"
    if readelf -l "$out" | grep -q INTERP; then echo "musl build: $out has an interpreter: not static" >&2; exit 1; fi
    if readelf -d "$out" | grep -q NEEDED; then echo "musl build: $out needs shared libraries: not static" >&2; exit 1; fi
    file "$out" >&2 || true
    echo "musl build: checked $out ($(du -h "$out" | cut -f1))" >&2
    echo "$out"
    ;;
  *) echo "usage: scripts/musl/build.sh addon|server [--release]" >&2; exit 2 ;;
esac
