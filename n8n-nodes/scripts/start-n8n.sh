#!/usr/bin/env bash
# The main command: starts a local n8n (2.41.1, on the pinned Node 24) with the flowguard nodes and
# the example workflows loaded, on the Embedded backend: no Redis needed.
#   bash n8n-nodes/scripts/start-n8n.sh            # then open http://localhost:5678
# First run: installs n8n (~6 min) and, when the addon is not built yet, builds flowguard (Rust).
# Environment: N8N_PORT (default 5678), N8N_USER_FOLDER (default n8n-nodes/.n8n-local).
set -euo pipefail

NODES="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$(cd "$NODES/.." && pwd)"
export N8N_USER_FOLDER="${N8N_USER_FOLDER:-$NODES/.n8n-local}"
export N8N_PORT="${N8N_PORT:-5678}"
mkdir -p "$N8N_USER_FOLDER"
# shellcheck source=n8n-env.sh
. "$NODES/scripts/n8n-env.sh"

if ! ls "$ROOT"/flowguard.*.node >/dev/null 2>&1; then
	echo "start-n8n: building the flowguard addon (Rust; needs cargo)"
	(cd "$ROOT" && npm install --no-audit --no-fund && npm run build)
fi
echo "start-n8n: installing n8n 2.41.1 and Node 24 if needed (about 6 minutes the first time)"
fg_install_n8n
echo "start-n8n: building n8n-nodes-flowguard"
fg_build_nodes
fg_link_nodes

if [ ! -f "$N8N_USER_FOLDER/.flowguard-examples-imported" ]; then
	echo "start-n8n: importing the example workflows"
	fg_n8n import:workflow --separate --input="$NODES/examples" >/dev/null
	# Sub-workflows called by Execute Workflow, and workflows with webhooks, must be published.
	for id in fgExLockSub000001 fgExLoop000000001 fgExReport0000001 fgExLockedJob0001 fgExLockedRoute01 fgExQueueEnqueue1 fgExQueueSync0001; do
		fg_n8n publish:workflow --id="$id" >/dev/null
	done
	touch "$N8N_USER_FOLDER/.flowguard-examples-imported"
fi

cat <<MSG
start-n8n: n8n is starting on http://localhost:$N8N_PORT (first visit: create the owner account).
  The examples are under Overview; try, in another terminal:
    curl -X POST localhost:$N8N_PORT/webhook/flowguard-project-loop     # run the weekly loop (2 projects fail on the first attempt)
    curl -X POST localhost:$N8N_PORT/webhook/flowguard-project-report   # counts per status
    curl -X POST localhost:$N8N_PORT/webhook/flowguard-locked-job & curl -X POST localhost:$N8N_PORT/webhook/flowguard-locked-job   # 2nd: Already Executing
    curl -X POST localhost:$N8N_PORT/webhook/flowguard-products-edited   # enqueue a bulk edit (6 edits, 4 products): Dedup Queue size
    curl -X POST localhost:$N8N_PORT/webhook/flowguard-product-sync      # read the batch, sync 0.5 s apart, ack (also runs every 30 min)
MSG
exec node "$FG_N8N_BIN" start
