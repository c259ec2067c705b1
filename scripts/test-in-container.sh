#!/bin/sh
# Run by release.yml inside node:<version>-alpine (musl) or node:<version>-bookworm-slim (glibc),
# in a checkout with the downloaded flowguard.<platform>.node: the binary must load in this libc and
# architecture, then the Node suites run on both backends against a redis-server of the distribution.
set -eu
if command -v apk >/dev/null; then
	apk add --no-cache redis >/dev/null
else
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes
node -e 'const r = process.report.getReport().header; console.log(process.arch, r.glibcVersionRuntime ? "glibc " + r.glibcVersionRuntime : "musl")'
node -e 'if (typeof require("./binding.js").Flowguard !== "function") { console.error("binding.js did not load the addon"); process.exit(1) }'
npm install --ignore-scripts --no-audit --no-fund
REDIS_URL=redis://127.0.0.1:6379 node scripts/node-suites.mjs __test__
