//! Concurrency Lock: keep a workflow, a part of one, or a sub-workflow from running twice at once.
//!
//! Acquire is atomic and returns an owner token and a fencing token that strictly increases per
//! lock name. Release and extend take the owner token: a worker whose lease ran out and whose lock
//! was taken by another never releases or extends the newer holder's lock.

use std::time::{Duration, Instant};

use crate::backend::BoxFuture;
use crate::client::Client;
use crate::error::Result;
use crate::wakeup::{Subscription, Topic, FALLBACK_POLL_MS};
use crate::{token, validate};

/// Default lease of a lock: 600 s, as the n8n template uses.
pub const DEFAULT_LOCK_MS: u64 = 600_000;

/// How long a lock name's fence counter is kept: in memory and in the durable file, 30 days after
/// the lease of its last acquisition (tokens strictly increase for a name used at least once in
/// that time; a name unused longer starts again at 1 and its counter is given back). On Redis a
/// counter lives 30 days from when it was made, and on PostgreSQL a name's row as in the durable
/// file; there every grant's token is at least the backend's clock in µs
/// (`rules::lock::next_fence`), so tokens keep increasing after a name is forgotten, and after a
/// failover that lost the counter (see `backend/redis/lock.rs`, `backend/postgres/lock.rs`).
pub const FENCE_KEEP_MS: u64 = 30 * 86_400_000;
/// First and largest pause between attempts while waiting for a lock.
const BACKOFF_START_MS: u64 = 10;
const BACKOFF_MAX_MS: u64 = 500;

/// One attempt at taking a lock, as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub acquired: bool,
    /// The fencing token of the lock now (ours when acquired, the holder's when not).
    pub fence: u64,
    /// Milliseconds left on the lease (ours when acquired, the holder's when not).
    pub remaining_ms: u64,
    /// The holder's label, when it gave one.
    pub holder: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockResult {
    pub name: String,
    pub acquired: bool,
    pub owner: Option<String>,
    pub fence: u64,
    pub remaining_ms: u64,
    pub holder: Option<String>,
    /// How long this call waited, in ms.
    pub waited_ms: u64,
    pub attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nobody holds the lock (it was released or its lease ran out).
    NotHeld,
    /// Someone else holds it now.
    NotOwner,
}

impl Refusal {
    pub fn as_str(&self) -> &'static str {
        match self {
            Refusal::NotHeld => "not_held",
            Refusal::NotOwner => "not_owner",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseResult {
    pub released: bool,
    pub reason: Option<Refusal>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendResult {
    pub extended: bool,
    pub remaining_ms: u64,
    pub reason: Option<Refusal>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub name: String,
    pub locked: bool,
    pub remaining_ms: u64,
    /// The holder's fencing token, or the last one issued when the lock is free (0: never taken).
    pub fence: u64,
    pub holder: Option<String>,
}

/// What a backend must do for the Concurrency Lock. Each method is one atomic step.
pub trait LockBackend {
    fn try_acquire<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, Attempt>;
    fn release<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult>;
    /// Releases the grant holding `name` with fencing token `fence`, whoever owns it
    /// ([`crate::rules::lock::release_fence`]).
    fn release_fence<'a>(&'a self, name: &'a str, fence: u64) -> BoxFuture<'a, ReleaseResult>;
    fn extend<'a>(&'a self, name: &'a str, owner: &'a str, lease_ms: u64) -> BoxFuture<'a, ExtendResult>;
    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, LockInfo>;
}

/// Options of an acquire, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    /// The lease. Default [`DEFAULT_LOCK_MS`].
    pub timeout: Option<Duration>,
    /// How long to keep trying while the lock is held. Default 0 (one attempt).
    pub wait: Option<Duration>,
    /// Shown to others while this call holds the lock.
    pub label: Option<String>,
}

/// The pause before the next attempt: exponential backoff with full jitter, never past the
/// deadline and never much past the holder's lease end.
fn pause(attempt: u32, holder_remaining_ms: u64, left: Duration) -> Duration {
    let cap = BACKOFF_START_MS.saturating_mul(1u64 << attempt.min(16)).min(BACKOFF_MAX_MS);
    let jitter = rand::random::<u16>() as u64;
    // Full jitter in [cap/2, cap].
    let ms = cap / 2 + (cap / 2) * jitter / 65535;
    let ms = if holder_remaining_ms > 0 { ms.min(holder_remaining_ms + 1) } else { ms };
    Duration::from_millis(ms.max(1)).min(left)
}

/// A wait's pause while its subscription is live: announcements wake it, this is the poll in case
/// one was missed, jittered in [`FALLBACK_POLL_MS`] / 2 to [`FALLBACK_POLL_MS`], never past the
/// holder's lease end or the deadline.
fn fallback_pause(holder_remaining_ms: u64, left: Duration) -> Duration {
    let jitter = rand::random::<u16>() as u64;
    let ms = FALLBACK_POLL_MS / 2 + (FALLBACK_POLL_MS / 2) * jitter / 65535;
    let ms = if holder_remaining_ms > 0 { ms.min(holder_remaining_ms + 1) } else { ms };
    Duration::from_millis(ms.max(1)).min(left)
}

/// Runs `attempt` until `outcome` says it got what it wanted, or `wait_ms` has passed, pausing
/// between attempts ([`pause`], given the time `outcome` says is left on the holder's lease).
/// With `wait_ms`, a subscription to the releases of what it waits for is taken before each
/// attempt while none is live (`subscribe`, see [`crate::wakeup`]): a release then ends the pause
/// at once, and the pauses are the fallback poll's ([`fallback_pause`]).
/// Returns the last attempt, the ms waited and the number of attempts.
pub(crate) async fn retry<T, F, Fut>(
    wait_ms: u64,
    subscribe: impl Fn() -> Option<Subscription>,
    mut attempt: F,
    outcome: impl Fn(&T) -> (bool, u64),
) -> Result<(T, u64, u32)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let start = Instant::now();
    let deadline = start + Duration::from_millis(wait_ms);
    let mut attempts = 0u32;
    let mut sub: Option<Subscription> = None;
    loop {
        if wait_ms > 0 && !sub.as_ref().is_some_and(Subscription::live) {
            sub = subscribe();
        }
        let a = attempt().await?;
        attempts += 1;
        let now = Instant::now();
        let (done, remaining_ms) = outcome(&a);
        if done || now >= deadline {
            return Ok((a, now.duration_since(start).as_millis() as u64, attempts));
        }
        match sub.as_mut().filter(|s| s.live()) {
            Some(s) => {
                tokio::select! {
                    () = tokio::time::sleep(fallback_pause(remaining_ms, deadline - now)) => {}
                    () = s.released() => {}
                }
            }
            None => tokio::time::sleep(pause(attempts - 1, remaining_ms, deadline - now)).await,
        }
    }
}

/// The lease and wait (ms) of an acquisition, and its label, checked: locks and semaphores.
pub(crate) fn check_lease(
    timeout: Option<Duration>,
    wait: Option<Duration>,
    label: Option<&str>,
) -> Result<(u64, u64)> {
    let lease_ms = validate::duration_or("timeout", timeout, DEFAULT_LOCK_MS)?;
    let wait_ms = match wait {
        Some(v) => validate::duration_or_zero("wait", v)?,
        None => 0,
    };
    if let Some(label) = label {
        validate::text("label", label)?;
    }
    Ok((lease_ms, wait_ms))
}

/// The name and owner token of a release or extension, checked: locks and semaphores.
pub(crate) fn check_holder(name: &str, owner: &str) -> Result<()> {
    validate::name("name", name)?;
    token::check_token("owner", owner)
}

impl Client {
    /// Acquires lock `name`. When it is held, either returns at once with `acquired: false`, or
    /// (with `wait_ms`) retries with backoff and jitter until it is free or `wait_ms` has passed.
    pub async fn acquire_lock(&self, name: &str, opts: AcquireOptions) -> Result<LockResult> {
        validate::name("name", name)?;
        let (lease_ms, wait_ms) = check_lease(opts.timeout, opts.wait, opts.label.as_deref())?;
        let owner = token::new_token();
        let label = opts.label.as_deref();
        let (a, waited_ms, attempts) = retry(
            wait_ms,
            || self.backend().subscribe(Topic::Lock, name),
            || self.backend().try_acquire(name, &owner, lease_ms, label),
            |a| (a.acquired, a.remaining_ms),
        )
        .await?;
        Ok(LockResult {
            name: name.to_string(),
            acquired: a.acquired,
            owner: a.acquired.then_some(owner),
            fence: a.fence,
            remaining_ms: a.remaining_ms,
            holder: a.holder,
            waited_ms,
            attempts,
        })
    }

    pub async fn release_lock(&self, name: &str, owner: &str) -> Result<ReleaseResult> {
        check_holder(name, owner)?;
        self.backend().release(name, owner).await
    }

    /// Releases lock `name` if the grant holding it now has fencing token `fence`, without its
    /// owner token: for an operator freeing a lock whose holder is gone (a crashed run holding a
    /// long lease). The fence names the grant the operator saw, so a lock taken again since is
    /// left alone (`released: false`, reason `not_owner`). The grant's holder learns of it at its
    /// next release or extension (`not_held`), and its fencing token is now stale.
    pub async fn force_release_lock(&self, name: &str, fence: u64) -> Result<ReleaseResult> {
        validate::name("name", name)?;
        if fence == 0 {
            return Err(crate::error::Error::invalid_at(
                "fence",
                "must be the fencing token of the grant to release (1 or more), got 0",
            ));
        }
        self.backend().release_fence(name, fence).await
    }

    pub async fn extend_lock(
        &self,
        name: &str,
        owner: &str,
        timeout: Option<Duration>,
    ) -> Result<ExtendResult> {
        check_holder(name, owner)?;
        let lease_ms = validate::duration_or("timeout", timeout, DEFAULT_LOCK_MS)?;
        self.backend().extend(name, owner, lease_ms).await
    }

    pub async fn get_lock(&self, name: &str) -> Result<LockInfo> {
        validate::name("name", name)?;
        self.backend().inspect(name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_is_bounded() {
        for attempt in 0..40 {
            let p = pause(attempt, 0, Duration::from_millis(10_000));
            assert!(p <= Duration::from_millis(BACKOFF_MAX_MS));
            assert!(p >= Duration::from_millis(1));
        }
        assert_eq!(pause(10, 0, Duration::from_millis(3)), Duration::from_millis(3));
        assert!(pause(10, 4, Duration::from_secs(1)) <= Duration::from_millis(5));
    }
}
