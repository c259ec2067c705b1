//! Semaphore methods of `Flowguard`.

use std::collections::BTreeMap;

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use super::from_js::{js_input, opt_ms, whole, Arg, Field};
use super::lock::{extend_args, fence_args, ExtendOptions, ExtendResult, ReleaseResult};
use super::promise;
use flowguard_core::semaphore::PermitOptions as CoreOptions;

/// Options of `acquirePermit`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct PermitOptions {
    /// How many holders the semaphore allows at once (1 to 1000). Required; callers of one name
    /// should give the same.
    pub permits: f64,
    /// The lease of this permit in ms: a holder that dies loses it then. Default 600000 (600 s).
    pub timeout_ms: Option<f64>,
    /// When all permits are held, keep trying (with backoff and jitter) for up to this many ms. Default 0.
    pub wait_ms: Option<f64>,
    /// A label shown to others while this call holds its permit (e.g. an execution id).
    pub label: Option<String>,
    /// The key this permit counts toward (e.g. a customer id); with `perKey`, both or neither.
    /// The permit is taken only if both the total (`permits`) and the key's count (`perKey`)
    /// allow it, in one atomic step (as Trigger.dev's `concurrency: { perKey, total }`).
    pub key: Option<String>,
    /// The most holders of `key` at once (1 to 1000).
    pub per_key: Option<f64>,
}

js_input!(PermitOptions {
    permits = "permits",
    timeout_ms = "timeoutMs",
    wait_ms = "waitMs",
    label = "label",
    key = "key",
    per_key = "perKey"
});

#[napi(object)]
pub struct PermitResult {
    pub name: String,
    pub acquired: bool,
    /// The owner token: the only key that releases or extends this permit.
    pub owner: Option<String>,
    /// The fencing token: strictly increasing per semaphore name (ours when acquired, the last
    /// one issued when not).
    pub fence: f64,
    /// Holders now (ours included when acquired).
    pub holders: u32,
    /// With a key: holders of that key now (ours included when acquired); 0 without one.
    pub key_holders: u32,
    /// Ms left on our lease when acquired; when not, ms until the first lease that would make
    /// room ends (the key's first when the key is full).
    pub remaining_ms: f64,
    pub waited_ms: f64,
    pub attempts: u32,
}

#[napi(object)]
pub struct PermitHolder {
    pub fence: f64,
    pub remaining_ms: f64,
    pub label: Option<String>,
    /// The key the permit was taken under (absent: without one).
    pub key: Option<String>,
}

#[napi(object)]
pub struct SemaphoreInfo {
    pub name: String,
    /// The live holders, first lease end first (their owner tokens are never shown).
    pub holders: Vec<PermitHolder>,
    /// The last fencing token issued (0: never taken).
    pub fence: f64,
    /// Live holders per key (keys in order; holders without a key are not counted here).
    pub keys: BTreeMap<String, u32>,
}

#[napi]
impl Flowguard {
    /// Takes one of `permits` permits of semaphore `name`. All held is a result (`acquired:
    /// false`, with the time until the first lease ends), not an error.
    #[napi]
    pub fn acquire_permit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        options: Arg<'e, PermitOptions>,
    ) -> Result<PromiseRaw<'e, PermitResult>> {
        let parsed = (|| {
            let o = options.get("options")?;
            let at = |name| Field("options", name);
            let opts = CoreOptions {
                permits: whole(at("permits"), Some(o.permits))?.unwrap_or(0),
                timeout: opt_ms(at("timeoutMs"), o.timeout_ms)?,
                wait: opt_ms(at("waitMs"), o.wait_ms)?,
                label: o.label,
                key: o.key,
                per_key: whole(at("perKey"), o.per_key)?,
            };
            Ok((name.get("name")?, opts))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (name, opts) = parsed?;
            let r = client.acquire_permit(&name, opts).await?;
            Ok(PermitResult {
                name: r.name,
                acquired: r.acquired,
                owner: r.owner,
                fence: r.fence as f64,
                holders: r.holders as u32,
                key_holders: r.key_holders as u32,
                remaining_ms: r.remaining_ms as f64,
                waited_ms: r.waited_ms as f64,
                attempts: r.attempts,
            })
        })
    }

    /// Releases a permit, only with its owner token (`not_held` when it has none: released,
    /// expired, or a wrong token).
    #[napi]
    pub fn release_permit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        owner: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, ReleaseResult>> {
        let parsed = (|| Ok((name.get("name")?, owner.get("owner")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (name, owner) = parsed?;
            Ok(client.release_permit(&name, &owner).await?.into())
        })
    }

    /// Releases the permit with fencing token `fence` (as `getSemaphore` shows it) without its
    /// owner token: for an operator freeing a permit a crashed run holds. `not_held` when no live
    /// permit has that fence. The old holder's next release or extension is refused (`not_held`).
    #[napi]
    pub fn force_release_permit<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
        fence: Arg<'e, f64>,
    ) -> Result<PromiseRaw<'e, ReleaseResult>> {
        let parsed = fence_args(name, fence);
        let client = self.client.clone();
        promise(env, async move {
            let (name, fence) = parsed?;
            Ok(client.force_release_permit(&name, fence).await?.into())
        })
    }

    /// Extends a permit's lease to `timeoutMs` from now, only with its owner token.
    #[napi]
    pub fn extend_permit<'e>(
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
            Ok(client.extend_permit(&name, &owner, timeout).await?.into())
        })
    }

    /// The live holders of a semaphore and its last fencing token.
    #[napi]
    pub fn get_semaphore<'e>(
        &self,
        env: &'e Env,
        name: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, SemaphoreInfo>> {
        let parsed = name.get("name");
        let client = self.client.clone();
        promise(env, async move {
            let r = client.get_semaphore(&parsed?).await?;
            let keys = r.key_counts().into_iter().map(|(k, n)| (k, n as u32)).collect();
            Ok(SemaphoreInfo {
                name: r.name,
                holders: r
                    .holders
                    .into_iter()
                    .map(|h| PermitHolder {
                        fence: h.fence as f64,
                        remaining_ms: h.remaining_ms as f64,
                        label: h.label,
                        key: h.key,
                    })
                    .collect(),
                fence: r.fence as f64,
                keys,
            })
        })
    }
}
