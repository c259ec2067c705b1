//! The `Flowguard` class: opening a client.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::{args, promise};
use flowguard_core::client::{Client, OpenOptions as CoreOpenOptions};

/// Options of `Flowguard.open`.
#[napi(object)]
#[allow(dead_code)]
pub struct OpenOptions {
    /// `redis://[user:password@]host[:port][/db]`, or `rediss://…` for TLS. Omitted: the embedded
    /// in-process store (one per process, shared by every client with the same prefix).
    pub url: Option<String>,
    /// A file for the durable embedded store (created when absent): items, locks, queued ids and
    /// values survive restarts and crashes, and processes that open the same file share it.
    /// Omitted (and no `url`): the in-memory embedded store, which forgets everything on exit.
    pub path: Option<String>,
    /// With `path`: `'process'` (default: a resolved call survives a crash of the process) or
    /// `'fsync'` (every commit flushed to the disk: it also survives a power loss; slower).
    pub durability: Option<String>,
    /// Prefix of every key. Default `fg:`. May not contain `{` or `}`.
    pub prefix: Option<String>,
    /// Connect timeout to Redis in ms. Default 2000.
    pub connect_timeout_ms: Option<f64>,
    /// Timeout of one Redis command in ms. Default 5000.
    pub command_timeout_ms: Option<f64>,
    /// How long item records are kept after their last change, in ms. Default 30 days.
    pub retention_ms: Option<f64>,
}

/// A client of one backend. Open it once and share it; connections are pooled per URL and
/// timeouts, so opening again with the same settings reuses the connection.
#[napi]
pub struct Flowguard {
    pub(crate) client: Client,
}

fn open_options(o: Option<&Unknown>) -> flowguard_core::Result<CoreOpenOptions> {
    let Some(o) = args::opt_object(o, "options")? else { return Ok(CoreOpenOptions::default()) };
    Ok(CoreOpenOptions {
        url: args::opt_string(&args::prop(&o, "url")?, "url")?,
        path: args::opt_string(&args::prop(&o, "path")?, "path")?,
        durability: args::opt_string(&args::prop(&o, "durability")?, "durability")?,
        prefix: args::opt_string(&args::prop(&o, "prefix")?, "prefix")?,
        connect_timeout_ms: args::opt_number(&args::prop(&o, "connectTimeoutMs")?, "connectTimeoutMs")?,
        command_timeout_ms: args::opt_number(&args::prop(&o, "commandTimeoutMs")?, "commandTimeoutMs")?,
        retention_ms: args::opt_number(&args::prop(&o, "retentionMs")?, "retentionMs")?,
    })
}

#[napi]
impl Flowguard {
    /// Opens a client: the embedded store when `options.url` is omitted, else Redis (connecting
    /// now, and failing within the connect timeout when it cannot be reached).
    #[napi(ts_args_type = "options?: OpenOptions", ts_return_type = "Promise<Flowguard>")]
    pub fn open<'e>(env: &'e Env, options: Option<Unknown<'e>>) -> Result<PromiseRaw<'e, Flowguard>> {
        let opts = open_options(options.as_ref());
        promise(env, async move { Ok(Flowguard { client: Client::open(opts?).await? }) })
    }

    /// `embedded` (in memory), `durable` (the embedded store in a file) or `redis`.
    #[napi(getter, ts_return_type = "'embedded' | 'durable' | 'redis'")]
    pub fn backend(&self) -> &'static str {
        self.client.kind()
    }

    /// The key prefix.
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.client.config().keys.prefix().to_string()
    }
}
