//! Concurrency Lock methods of `Flowguard`.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use super::from_js::{js_input, opt, opt_ms, whole, Arg, Field};
use super::promise;
use flowguard_core::lock::{self as core, AcquireOptions};

/// Options of `acquireLock` (and `withLock`).
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct LockOptions {
    /// The lease in ms. Default 600000 (600 s).
    pub timeout_ms: Option<f64>,
    /// When the lock is held, keep trying (with backoff and jitter) for up to this many ms. Default 0.
    pub wait_ms: Option<f64>,
    /// A label shown to others while this call holds the lock (e.g. a workflow or execution id).
    pub label: Option<String>,
}

js_input!(LockOptions { timeout_ms = "timeoutMs", wait_ms = "waitMs", label = "label" });

/// Options of `extendLock`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct ExtendOptions {
    /// The new lease in ms, from now. Default 600000 (600 s).
    pub timeout_ms: Option<f64>,
}

js_input!(ExtendOptions { timeout_ms = "timeoutMs" });

#[napi(object)]
pub struct LockResult {
    pub name: String,
    pub acquired: bool,
    /// The owner token: the only key that releases or extends this hold.
    pub owner: Option<String>,
    /// The fencing token: strictly increasing per lock name (ours when acquired, the holder's when not).
    pub fence: f64,
    /// Ms left on the lease (ours when acquired, the holder's when not).
    pub remaining_ms: f64,
    /// The holder's label, when it gave one.
    pub holder: Option<String>,
    pub waited_ms: f64,
    pub attempts: u32,
}

#[napi(object)]
pub struct ReleaseResult {
    pub released: bool,
    #[napi(ts_type = "'not_held' | 'not_owner'")]
    pub reason: Option<String>,
}

#[napi(object)]
pub struct ExtendResult {
    pub extended: bool,
    pub remaining_ms: f64,
    #[napi(ts_type = "'not_held' | 'not_owner'")]
    pub reason: Option<String>,
}

#[napi(object)]
pub struct LockInfo {
    pub name: String,
    pub locked: bool,
    pub remaining_ms: f64,
    /// The holder's fencing token, or the last one issued when free (0: never taken).
    pub fence: f64,
    pub holder: Option<String>,
}

impl From<core::ReleaseResult> for ReleaseResult {
    fn from(r: core::ReleaseResult) -> Self {
        ReleaseResult { released: r.released, reason: r.reason.map(|x| x.as_str().to_string()) }
    }
}

impl From<core::ExtendResult> for ExtendResult {
    fn from(r: core::ExtendResult) -> Self {
        ExtendResult {
            extended: r.extended,
            remaining_ms: r.remaining_ms as f64,
            reason: r.reason.map(|x| x.as_str().to_string()),
        }
    }
}

/// The name, owner and lease of an extend call, converted.
pub(crate) fn extend_args(
    name: Arg<'_, String>,
    owner: Arg<'_, String>,
    options: Option<Arg<'_, ExtendOptions>>,
) -> flowguard_core::Result<(String, String, Option<std::time::Duration>)> {
    let (name, owner) = (name.get("name")?, owner.get("owner")?);
    let timeout = match opt(&options, "options")? {
        Some(o) => opt_ms(Field("options", "timeoutMs"), o.timeout_ms)?,
        None => None,
    };
    Ok((name, owner, timeout))
}

/// The name and fencing token of an operator's release (a lock's or a permit's), converted.
pub(crate) fn fence_args(
    name: Arg<'_, String>,
    fence: Arg<'_, f64>,
) -> flowguard_core::Result<(String, u64)> {
    let fence = whole("fence", Some(fence.get("fence")?))?.unwrap_or(0);
    Ok((name.get("name")?, fence))
}

fn lock_opts(o: Option<LockOptions>) -> flowguard_core::Result<AcquireOptions> {
    let Some(o) = o else { return Ok(AcquireOptions::default()) };
    let at = |name| Field("options", name);
    Ok(AcquireOptions {
        timeout: opt_ms(at("timeoutMs"), o.timeout_ms)?,
        wait: opt_ms(at("waitMs"), o.wait_ms)?,
        label: o.label,
    })
}

#[napi]
impl Flowguard {
    /// Acquires a lock. A held lock is a result (`acquired: false`, with the holder's label and
    /// time left), not an error.
    #[napi]
    pub fn acquire_lock<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        options: Option<Arg<'e, LockOptions>>,
    ) -> Result<PromiseRaw<'e, LockResult>> {
        let parsed = (|| Ok((name.get("name")?, lock_opts(opt(&options, "options")?)?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (name, opts) = parsed?;
            let r = client.acquire_lock(&name, opts).await?;
            Ok(LockResult {
                name: r.name,
                acquired: r.acquired,
                owner: r.owner,
                fence: r.fence as f64,
                remaining_ms: r.remaining_ms as f64,
                holder: r.holder,
                waited_ms: r.waited_ms as f64,
                attempts: r.attempts,
            })
        })
    }

    /// Releases a lock, only with its owner token; otherwise reports why and changes nothing.
    #[napi]
    pub fn release_lock<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        owner: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, ReleaseResult>> {
        let parsed = (|| Ok((name.get("name")?, owner.get("owner")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (name, owner) = parsed?;
            Ok(client.release_lock(&name, &owner).await?.into())
        })
    }

    /// Releases a lock without its owner token, if the grant holding it now has fencing token
    /// `fence` (as `getLock` shows it): for an operator freeing a lock a crashed run holds. A lock
    /// taken again since is left alone (`released: false`, `not_owner`); a free one is
    /// `not_held`. The old holder's next release or extension is refused (`not_held`).
    #[napi]
    pub fn force_release_lock<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        fence: Arg<'e, f64>,
    ) -> Result<PromiseRaw<'e, ReleaseResult>> {
        let parsed = fence_args(name, fence);
        let client = self.client.clone();
        promise(env, async move {
            let (name, fence) = parsed?;
            Ok(client.force_release_lock(&name, fence).await?.into())
        })
    }

    /// Extends a lock's lease to `timeoutMs` from now, only with its owner token.
    #[napi]
    pub fn extend_lock<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        owner: Arg<'e, String>,
        options: Option<Arg<'e, ExtendOptions>>,
    ) -> Result<PromiseRaw<'e, ExtendResult>> {
        let parsed = extend_args(name, owner, options);
        let client = self.client.clone();
        promise(env, async move {
            let (name, owner, timeout) = parsed?;
            Ok(client.extend_lock(&name, &owner, timeout).await?.into())
        })
    }

    /// Whether a lock is held, for how long, and its fencing token.
    #[napi]
    pub fn get_lock<'e>(&self, env: &'e Env, name: Arg<'e, String>) -> Result<PromiseRaw<'e, LockInfo>> {
        let parsed = name.get("name");
        let client = self.client.clone();
        promise(env, async move {
            let r = client.get_lock(&parsed?).await?;
            Ok(LockInfo {
                name: r.name,
                locked: r.locked,
                remaining_ms: r.remaining_ms as f64,
                fence: r.fence as f64,
                holder: r.holder,
            })
        })
    }
}
