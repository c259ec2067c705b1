//! Semaphore: at most `permits` holders of one name at once, across processes.
//!
//! Like the Concurrency Lock, each permit is a lease: acquire returns an owner token (the only
//! key that releases or extends that permit) and a fencing token that strictly increases per
//! name; the permit of a holder that died ends with its lease, so its place is taken again. The
//! number of permits is given by each call (as with redis-semaphore): callers of one name should
//! agree on it.

use std::time::Duration;

use crate::backend::BoxFuture;
use crate::client::Client;
use crate::error::Result;
use crate::lock::{check_holder, check_lease, retry, ExtendResult, ReleaseResult, DEFAULT_LOCK_MS};
use crate::wakeup::Topic;
use crate::{token, validate};

/// The most permits of one semaphore: every step on a full one touches each holder at most once.
pub const MAX_PERMITS: u64 = 1000;

/// One attempt at taking a permit, as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitAttempt {
    pub acquired: bool,
    /// Ours when acquired; the last one issued when not (0: never taken).
    pub fence: u64,
    /// Live holders after the attempt (ours included).
    pub holders: u64,
    /// When not acquired: ms until the first holder's lease ends.
    pub remaining_ms: u64,
}

/// A live holder, as inspect shows it (its owner token never leaves the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub fence: u64,
    pub remaining_ms: u64,
    pub label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SemaphoreInfo {
    pub name: String,
    /// Live holders, first lease end first.
    pub holders: Vec<Holder>,
    /// The last fencing token issued (0: never taken).
    pub fence: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitResult {
    pub name: String,
    pub acquired: bool,
    pub owner: Option<String>,
    pub fence: u64,
    pub holders: u64,
    /// Ms left on our lease when acquired; when not, ms until the first holder's lease ends.
    pub remaining_ms: u64,
    pub waited_ms: u64,
    pub attempts: u32,
}

/// What a backend must do for the Semaphore. Each method is one atomic step; expired holders
/// are dropped by every step that meets them.
pub trait SemaphoreBackend {
    fn try_acquire_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        permits: u64,
        lease_ms: u64,
        label: Option<&'a str>,
    ) -> BoxFuture<'a, PermitAttempt>;
    /// Releases the permit of `owner` (`not_held` when it has none: released, expired, or never).
    fn release_permit<'a>(&'a self, name: &'a str, owner: &'a str) -> BoxFuture<'a, ReleaseResult>;
    fn extend_permit<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        lease_ms: u64,
    ) -> BoxFuture<'a, ExtendResult>;
    fn inspect_semaphore<'a>(&'a self, name: &'a str) -> BoxFuture<'a, SemaphoreInfo>;
}

/// Options of [`Client::acquire_permit`], before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermitOptions {
    /// How many holders at once. Required, 1..=[`MAX_PERMITS`].
    pub permits: u64,
    /// The lease. Default 600 s.
    pub timeout: Option<Duration>,
    /// How long to keep trying while all permits are held. Default 0 (one attempt).
    pub wait: Option<Duration>,
    /// Shown to others while this call holds its permit.
    pub label: Option<String>,
}

impl Client {
    /// Takes one of `permits` permits of semaphore `name`. When all are held, either returns at
    /// once with `acquired: false`, or (with `wait`) retries with backoff and jitter until one is
    /// free or `wait` has passed.
    pub async fn acquire_permit(&self, name: &str, opts: PermitOptions) -> Result<PermitResult> {
        validate::name("name", name)?;
        let permits = validate::range("permits", opts.permits, 1, MAX_PERMITS)?;
        let (lease_ms, wait_ms) = check_lease(opts.timeout, opts.wait, opts.label.as_deref())?;
        let owner = token::new_token();
        let label = opts.label.as_deref();
        let (a, waited_ms, attempts) = retry(
            wait_ms,
            || self.backend().subscribe(Topic::Permit, name),
            || self.backend().try_acquire_permit(name, &owner, permits, lease_ms, label),
            |a| (a.acquired, a.remaining_ms),
        )
        .await?;
        Ok(PermitResult {
            name: name.to_string(),
            acquired: a.acquired,
            owner: a.acquired.then_some(owner),
            fence: a.fence,
            holders: a.holders,
            remaining_ms: a.remaining_ms,
            waited_ms,
            attempts,
        })
    }

    pub async fn release_permit(&self, name: &str, owner: &str) -> Result<ReleaseResult> {
        check_holder(name, owner)?;
        self.backend().release_permit(name, owner).await
    }

    pub async fn extend_permit(
        &self,
        name: &str,
        owner: &str,
        timeout: Option<Duration>,
    ) -> Result<ExtendResult> {
        check_holder(name, owner)?;
        let lease_ms = validate::duration_or("timeout", timeout, DEFAULT_LOCK_MS)?;
        self.backend().extend_permit(name, owner, lease_ms).await
    }

    pub async fn get_semaphore(&self, name: &str) -> Result<SemaphoreInfo> {
        validate::name("name", name)?;
        self.backend().inspect_semaphore(name).await
    }
}
