//! Job State methods of `Flowguard`. Values cross as JSON text; index.js adds `getState`,
//! `setState` and `once`, which turn JavaScript values into JSON and back.

use napi::bindgen_prelude::*;
use napi::Env;
use napi_derive::napi;

use super::client::Flowguard;
use super::{args, promise};
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

#[napi(object)]
#[allow(dead_code)]
pub struct StateSetOptions {
    /// Expire this many ms after the write. Without `ttlMs` or `expiresAt` the value does not
    /// expire (and an earlier expiry is cleared).
    pub ttl_ms: Option<f64>,
    /// Expire at this time, in ms since the epoch; it must be in the future.
    pub expires_at: Option<f64>,
    /// Write only when the key holds no value. Default false.
    pub if_absent: Option<bool>,
}

#[napi(object)]
pub struct StateSetJsonResult {
    /// False only with `ifAbsent` when the key held a value (which was kept).
    pub written: bool,
    /// The JSON the key holds now.
    pub json: String,
    pub expires_at: Option<f64>,
}

#[napi(object)]
#[allow(dead_code)]
pub struct IncrementOptions {
    /// Expire the counter this many ms after it is created (applied when it has no expiry).
    pub ttl_ms: Option<f64>,
}

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
}

fn set_opts(o: Option<&Unknown>) -> flowguard_core::Result<SetOptions> {
    let Some(o) = args::opt_object(o, "options")? else { return Ok(SetOptions::default()) };
    Ok(SetOptions {
        ttl_ms: args::opt_number(&args::prop(&o, "ttlMs")?, "ttlMs")?,
        expires_at: args::opt_number(&args::prop(&o, "expiresAt")?, "expiresAt")?,
        if_absent: args::opt_bool(&args::prop(&o, "ifAbsent")?, "ifAbsent")?.unwrap_or(false),
    })
}

fn opt_num(o: Option<&Unknown>, name: &str) -> flowguard_core::Result<Option<f64>> {
    match args::opt_object(o, "options")? {
        Some(o) => args::opt_number(&args::prop(&o, name)?, name),
        None => Ok(None),
    }
}

#[napi]
impl Flowguard {
    /// Reads values as JSON text, in one round trip. Prefer `getState` / `getStates`.
    #[napi(ts_args_type = "keys: string[]", ts_return_type = "Promise<StateEntry[]>")]
    pub fn get_state_json<'e>(
        &self,
        env: &'e Env,
        keys: Unknown<'e>,
    ) -> Result<PromiseRaw<'e, Vec<StateEntry>>> {
        let parsed = args::strings(&keys, "keys");
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
    #[napi(
        ts_args_type = "key: string, json: string, options?: StateSetOptions",
        ts_return_type = "Promise<StateSetJsonResult>"
    )]
    pub fn set_state_json<'e>(
        &self,
        env: &'e Env,
        key: Unknown<'e>,
        json: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, StateSetJsonResult>> {
        let parsed = (|| {
            Ok((args::string(&key, "key")?, args::string(&json, "value")?, set_opts(options.as_ref())?))
        })();
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
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<boolean>")]
    pub fn delete_state<'e>(&self, env: &'e Env, key: Unknown<'e>) -> Result<PromiseRaw<'e, bool>> {
        let parsed = args::string(&key, "key");
        let client = self.client.clone();
        promise(env, async move { client.delete_state(&parsed?).await })
    }

    /// Atomically adds `by` (default 1, may be negative) to an integer counter (absent counts as
    /// 0) and resolves to the new value.
    #[napi(
        ts_args_type = "key: string, by?: number, options?: IncrementOptions",
        ts_return_type = "Promise<number>"
    )]
    pub fn increment<'e>(
        &self,
        env: &'e Env,
        key: Unknown<'e>,
        by: Option<Unknown<'e>>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, f64>> {
        let parsed = (|| {
            let by = match &by {
                Some(v) => args::opt_number(v, "by")?,
                None => None,
            };
            Ok((args::string(&key, "key")?, by, opt_num(options.as_ref(), "ttlMs")?))
        })();
        let client = self.client.clone();
        promise(env, async move {
            let (key, by, ttl) = parsed?;
            Ok(client.increment(&key, by, ttl).await? as f64)
        })
    }

    /// Idempotency: takes `key` for this caller when it is free (for `leaseMs`, default 600000),
    /// or reports that another caller holds it, or gives the stored result. Prefer `once`.
    #[napi(
        ts_args_type = "key: string, options?: { leaseMs?: number }",
        ts_return_type = "Promise<KeyClaimResult>"
    )]
    pub fn claim_key<'e>(
        &self,
        env: &'e Env,
        key: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, KeyClaimResult>> {
        let parsed = (|| Ok((args::string(&key, "key")?, opt_num(options.as_ref(), "leaseMs")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (key, lease) = parsed?;
            Ok(match client.claim_key(&key, lease).await? {
                KeyClaim::Claimed { owner, lease_ms } => KeyClaimResult {
                    status: "claimed".into(),
                    owner: Some(owner),
                    remaining_ms: Some(lease_ms as f64),
                    json: None,
                    expires_at: None,
                },
                KeyClaim::Pending { remaining_ms } => KeyClaimResult {
                    status: "pending".into(),
                    owner: None,
                    remaining_ms: Some(remaining_ms as f64),
                    json: None,
                    expires_at: None,
                },
                KeyClaim::Done { json, expires_at } => KeyClaimResult {
                    status: "done".into(),
                    owner: None,
                    remaining_ms: None,
                    json: Some(json),
                    expires_at: expires_at.map(|t| t as f64),
                },
            })
        })
    }

    /// Idempotency: stores the result (JSON text) of the work done under `owner` for `ttlMs`
    /// (default 24 h). Rejects with `ERR_NOT_OWNER` when the key's lease ran out meanwhile.
    #[napi(
        ts_args_type = "key: string, owner: string, json: string, options?: { ttlMs?: number }",
        ts_return_type = "Promise<void>"
    )]
    pub fn complete_key<'e>(
        &self,
        env: &'e Env,
        key: Unknown<'e>,
        owner: Unknown<'e>,
        json: Unknown<'e>,
        options: Option<Unknown<'e>>,
    ) -> Result<PromiseRaw<'e, ()>> {
        let parsed = (|| {
            Ok((
                args::string(&key, "key")?,
                args::string(&owner, "owner")?,
                args::string(&json, "result")?,
                opt_num(options.as_ref(), "ttlMs")?,
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
    #[napi(ts_args_type = "key: string, owner: string", ts_return_type = "Promise<boolean>")]
    pub fn release_key<'e>(
        &self,
        env: &'e Env,
        key: Unknown<'e>,
        owner: Unknown<'e>,
    ) -> Result<PromiseRaw<'e, bool>> {
        let parsed = (|| Ok((args::string(&key, "key")?, args::string(&owner, "owner")?)))();
        let client = self.client.clone();
        promise(env, async move {
            let (key, owner) = parsed?;
            client.release_key(&key, &owner).await
        })
    }
}
