//! Whether the process runs Node.js itself, whose libuv the event-loop connection drives.
//!
//! Bun and Deno run Node-API addons too, without Node's libuv: Bun exports functions named like
//! libuv's that abort the process when called, and Deno's stand-ins do not drive the loop the
//! connection needs (its calls time out, and the process dies at exit). Nothing JavaScript can
//! change may decide this: the executable's name says nothing (a `bun build --compile` program
//! has its own name, and a copy of bun may be called `node`), and a script can delete
//! `process.versions.bun` or add it. So the process itself is asked, once: Node exports its
//! embedder API, whose entry point `node::Start` neither Bun nor Deno export (they export the
//! addon-facing parts only: Node-API, a few `node::` hooks, libuv names). A runtime that lacks
//! it counts as not Node, and the caller keeps to Node-API alone (the path that works
//! everywhere).

use std::sync::OnceLock;

/// `node::Start(int, char**)`, Itanium-mangled (the C++ ABI of every Unix Node supports).
const NODE_START: &std::ffi::CStr = c"_ZN4node5StartEiPPc";

/// Whether the process is Node.js itself (or embeds it: Electron, a libnode host).
pub(crate) fn is_node() -> bool {
    static NODE: OnceLock<bool> = OnceLock::new();
    *NODE.get_or_init(|| !crate::exported::lookup(NODE_START).is_null())
}
