#!/usr/bin/env bash
# Runs a command in a view of this Debian machine that looks like Alpine to musl programs: a private mount
# namespace (needs root, as CI has; nothing outside the namespace changes, and it ends with the command).
#
#   scripts/musl/env.sh CMD [ARGS...]        ($MUSL_ENV laid out by scripts/musl/setup.sh)
#
# Inside:
# - /lib/ld-musl-x86_64.so.1 (musl-tools' link to /usr/lib/x86_64-linux-musl/libc.so) is musl 1.2.5 from
#   $MUSL_ENV/lib, which also holds the musl libgcc_s.so.1 and libstdc++.so.6 on musl's default search path,
#   as Alpine's /usr/lib does;
# - /usr/bin/ldd is the musl loader, as on Alpine: napi-rs' binding.js reads that file to tell musl from glibc
#   (and so loads flowguard.linux-x64-musl.node);
# - /etc/alpine-release exists (what node-gyp-build and others check), through an overlay on /etc.
# The rest (the shell, coreutils, redis-server) stays Debian's glibc userland: this is not an Alpine image.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/musl/vars.sh
. "$here/vars.sh"
[ -e "$MUSL_ENV/.ready-$MUSL_LAYOUT" ] || { echo "musl env: $MUSL_ENV is not laid out (scripts/musl/setup.sh)" >&2; exit 1; }
# shellcheck disable=SC2016 # expanded by the inner bash, in the namespace
exec unshare -m --propagation private bash -c '
set -e
mount --bind "$MUSL_ENV/lib" /usr/lib/x86_64-linux-musl
mount --bind "$MUSL_ENV/lib/libc.so" /usr/bin/ldd
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$MUSL_ENV/etc-upper,workdir=$MUSL_ENV/etc-work" /etc
exec "$@"' musl-env "$@"
