# shellcheck shell=bash disable=SC2034
# Sourced by scripts/musl/*.sh: where the musl env lives and what it is made of. Bump MUSL_LAYOUT when
# setup.sh lays it out differently, so a cached env is made again.
# In the repository's target/ (beside target/musl and target/musl-static, gone with them), not under $HOME:
# durable-files.test.mjs starts process.execPath as user nobody, who cannot enter /root.
: "${MUSL_ENV:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/musl-env}"
export MUSL_ENV
NODE_WHEEL_VERSION=24.19.0
NODE_WHEEL_SHA256=28d078b2ced9e2069516e652dc4b1380e7a1a7f2d3934eccd1611586d283ba4c
MUSL_LAYOUT="1-node$NODE_WHEEL_VERSION"
