//! Job State methods of `Flowguard`. Values cross as JSON text; index.js adds `getState`,
//! `setState` and `once`, which turn JavaScript values into JSON and back.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use super::from_js::{js_input, opt, opt_ms, signed, whole, Arg, Field};
use super::promise;
use flowguard_core::state::{KeyClaim, SetOptions};

#[napi(object)]
pub struct StateEntry {
    pub key: String,
    pub found: bool,
    /// The value as JSON text.
    pub json: Option<String>,
    /// When it expires, in ms since the epoch, if it does.
    pub expires_at: Option<f64>,
}

/// Options of `setState` / `setStateJson`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct StateSetOptions {
    /// Expire this many ms after the write. Without `ttlMs` or `expiresAt` the value does not
    /// expire (and an earlier expiry is cleared).
    pub ttl_ms: Option<f64>,
    /// Expire at this time, in ms since the epoch; it must be in the future.
    pub expires_at: Option<f64>,
    /// Write only when the key holds no value. Default false.
    pub if_absent: Option<bool>,
}

js_input!(StateSetOptions { ttl_ms = "ttlMs", expires_at = "expiresAt", if_absent = "ifAbsent" });

#[napi(object)]
pub struct StateSetJsonResult {
    /// False only with `ifAbsent` when the key held a value (which was kept).
    pub written: bool,
    /// The JSON the key holds now.
    pub json: String,
    pub expires_at: Option<f64>,
}

/// Options of `increment`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct IncrementOptions {
    /// Expire the counter this many ms after it is created (applied when it has no expiry).
    pub ttl_ms: Option<f64>,
}

js_input!(IncrementOptions { ttl_ms = "ttlMs" });

/// Options of `claimKey`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct ClaimKeyOptions {
    /// How long this caller may run the work before another may take the key over, in ms.
    /// Default 600000.
    pub lease_ms: Option<f64>,
    /// While another caller holds the key, try again (with backoff; on PostgreSQL also when its
    /// release or result is announced) until it is claimed or done, for up to this many ms.
    /// Default 0: answer `pending` at once.
    pub wait_ms: Option<f64>,
}

js_input!(ClaimKeyOptions { lease_ms = "leaseMs", wait_ms = "waitMs" });

/// Options of `completeKey`.
#[napi(object, object_from_js = false, object_to_js = false)]
pub struct CompleteKeyOptions {
    /// How long the result is kept, in ms. Default 86400000 (24 h).
    pub ttl_ms: Option<f64>,
}

js_input!(CompleteKeyOptions { ttl_ms = "ttlMs" });

#[napi(object)]
pub struct KeyClaimResult {
    /// `claimed`: this caller runs the work and must `completeKey` or `releaseKey`;
    /// `pending`: another caller runs it; `done`: the stored result is in `json`.
    #[napi(ts_type = "'claimed' | 'pending' | 'done'")]
    pub status: String,
    pub owner: Option<String>,
    /// Ms left on the lease (claimed: ours; pending: the other caller's).
    pub remaining_ms: Option<f64>,
    pub json: Option<String>,
    pub expires_at: Option<f64>,
    /// How many times the key was tried (1 without `waitMs`).
    pub attempts: f64,
}

fn set_opts(o: Option<StateSetOptions>) -> flowguard_core::Result<SetOptions> {
    let Some(o) = o else { return Ok(SetOptions::default()) };
    let at = |name| Field("options", name);
    Ok(SetOptions {
        ttl: opt_ms(at("ttlMs"), o.ttl_ms)?,
        expires_at: whole(at("expiresAt"), o.expires_at)?,
        if_absent: o.if_absent.unwrap_or(false),
    })
}

/// The `ttlMs` (or `leaseMs`) of an options object.
fn ttl(name: &'static str, v: Option<Option<f64>>) -> flowguard_core::Result<Option<std::time::Duration>> {
    opt_ms(Field("options", name), v.flatten())
}

#[napi]
impl Flowguard {
    /// Reads values as JSON text, in one round trip. Prefer `getState` / `getStates`.
    #[napi]
    pub fn get_state_json<'e>(
        &self,
        env: &'e Env,
        keys: Arg<'e, Vec<String>>,
    ) -> Result<PromiseRaw<'e, Vec<StateEntry>>> {
        let parsed = keys.get("keys");
        let client = self.client.clone();
        promise(env, async move {
            let keys = parsed?;
            let values = client.get_state(keys.clone()).await?;
            Ok(keys
                .into_iter()
                .zip(values)
                .map(|(key, v)| match v {
                    Some(v) => StateEntry {
                        key,
                        found: true,
                        json: Some(v.json),
                        expires_at: v.expires_at.map(|t| t as f64),
                    },
                    None => StateEntry { key, found: false, json: None, expires_at: None },
                })
                .collect())
        })
    }

    /// Writes a value given as JSON text (at most 1 MiB). Prefer `setState`.
    #[napi]
    pub fn set_state_json<'e>(
        &self,
        env: &'e Env,
        key: Arg<'e, String>,
        json: Arg<'e, String>,
        options: Option<Arg<'e, StateSetOptions>>,
    ) -> Result<PromiseRaw<'e, StateSetJsonResult>> {
        let parsed = (|| Ok((key.get("key")?, json.get("value")?, set_opts(opt(&options, "options")?)?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (key, json, opts) = parsed?;
            let r = client.set_state(&key, &json, opts).await?;
            Ok(StateSetJsonResult {
                written: r.written,
                json: r.current.json,
                expires_at: r.current.expires_at.map(|t| t as f64),
            })
        })
    }

    /// Deletes a value. Resolves to whether there was one.
    #[napi]
    pub fn delete_state<'e>(&self, env: &'e Env, key: Arg<'e, String>) -> Result<PromiseRaw<'e, bool>> {
        let parsed = key.get("key");
        let client = self.client.clone();
        promise(env, async move { client.delete_state(&parsed?).await })
    }

    /// Atomically adds `by` (default 1, may be negative) to an integer counter (absent counts as
    /// 0) and resolves to the new value.
    #[napi]
    pub fn increment<'e>(
        &self,
        env: &'e Env,
        key: Arg<'e, String>,
        by: Option<Arg<'e, f64>>,
        options: Option<Arg<'e, IncrementOptions>>,
    ) -> Result<PromiseRaw<'e, f64>> {
        let parsed = (|| {
            let key = key.get("key")?;
            let by = signed("by", opt(&by, "by")?)?;
            Ok((key, by, ttl("ttlMs", opt(&options, "options")?.map(|o| o.ttl_ms))?))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (key, by, ttl) = parsed?;
            Ok(client.increment(&key, by, ttl).await? as f64)
        })
    }

    /// Idempotency: takes `key` for this caller when it is free (for `leaseMs`, default 600000),
    /// or reports that another caller holds it, or gives the stored result. Prefer `once`.
    #[napi]
    pub fn claim_key<'e>(
        &self,
        env: &'e Env,
        key: Arg<'e, String>,
        options: Option<Arg<'e, ClaimKeyOptions>>,
    ) -> Result<PromiseRaw<'e, KeyClaimResult>> {
        let parsed = (|| {
            let o = opt(&options, "options")?;
            let wait = ttl("waitMs", o.as_ref().map(|o| o.wait_ms))?;
            Ok((key.get("key")?, ttl("leaseMs", o.map(|o| o.lease_ms))?, wait))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (key, lease, wait) = parsed?;
            let (claim, attempts) = match wait {
                Some(wait) => client.claim_key_waiting(&key, lease, wait).await?,
                None => (client.claim_key(&key, lease).await?, 1),
            };
            let attempts = f64::from(attempts);
            Ok(match claim {
                KeyClaim::Claimed { owner, lease_ms } => KeyClaimResult {
                    status: "claimed".into(),
                    owner: Some(owner),
                    remaining_ms: Some(lease_ms as f64),
                    json: None,
                    expires_at: None,
                    attempts,
                },
                KeyClaim::Pending { remaining_ms } => KeyClaimResult {
                    status: "pending".into(),
                    owner: None,
                    remaining_ms: Some(remaining_ms as f64),
                    json: None,
                    expires_at: None,
                    attempts,
                },
                KeyClaim::Done { json, expires_at } => KeyClaimResult {
                    status: "done".into(),
                    owner: None,
                    remaining_ms: None,
                    json: Some(json),
                    expires_at: expires_at.map(|t| t as f64),
                    attempts,
                },
            })
        })
    }

    /// Idempotency: stores the result (JSON text) of the work done under `owner` for `ttlMs`
    /// (default 24 h). Rejects with `ERR_NOT_OWNER` when the key's lease ran out meanwhile.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn complete_key<'e>(
        &self,
        env: &'e Env,
        key: Arg<'e, String>,
        owner: Arg<'e, String>,
        json: Arg<'e, String>,
        options: Option<Arg<'e, CompleteKeyOptions>>,
    ) -> Result<PromiseRaw<'e, ()>> {
        let parsed = (|| {
            Ok((
                key.get("key")?,
                owner.get("owner")?,
                json.get("result")?,
                ttl("ttlMs", opt(&options, "options")?.map(|o| o.ttl_ms))?,
            ))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (key, owner, json, ttl) = parsed?;
            client.complete_key(&key, &owner, &json, ttl).await
        })
    }

    /// Idempotency: frees a pending key held by `owner`, so a retry can run. Resolves to whether
    /// it was freed (false: not pending under this owner any more).
    #[napi]
    pub fn release_key<'e>(
        &self,
        env: &'e Env,
        key: Arg<'e, String>,
        owner: Arg<'e, String>,
    ) -> Result<PromiseRaw<'e, bool>> {
        let parsed = (|| Ok((key.get("key")?, owner.get("owner")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (key, owner) = parsed?;
            client.release_key(&key, &owner).await
        })
    }
}
