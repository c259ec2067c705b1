//! The pattern the PostgreSQL backend does not have yet: the Dedup Queue (and so the catalog's
//! listing of queues). Each call answers `ERR_UNSUPPORTED` naming the pattern and the backends
//! that have it, before touching the database: never a silent stub.

use super::Postgres;
use crate::backend::{ready, BoxFuture};
use crate::error::{Error, ErrorCode};
use crate::queue::{
    Debounce, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim, ShardRef, ShardSize,
};

/// The refusal of a call of `pattern`.
pub(super) fn unsupported<'a, T: Send + 'a>(pattern: &str) -> BoxFuture<'a, T> {
    ready(Err(Error::new(
        ErrorCode::Unsupported,
        format!(
            "the {pattern} is not available on the PostgreSQL backend yet (built so far: Concurrency Lock, Job \
             State, Item Tracker, Rate Limiter, Semaphore, the catalog but its queues); use the in-memory, \
             durable (path) or Redis backend for it"
        ),
    )))
}

pub(super) const QUEUE: &str = "Dedup Queue";

impl QueueBackend for Postgres {
    fn enqueue<'a>(
        &'a self,
        _at: ShardRef<'a>,
        _ids: &'a [String],
        _delay_ms: u64,
        _debounce: Debounce,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        unsupported(QUEUE)
    }
    fn claim<'a>(
        &'a self,
        _at: ShardRef<'a>,
        _owner: &'a str,
        _limit: u64,
        _visibility_ms: u64,
    ) -> BoxFuture<'a, ShardClaim> {
        unsupported(QUEUE)
    }
    fn settle<'a>(
        &'a self,
        _at: ShardRef<'a>,
        _owner: &'a str,
        _ids: &'a [String],
        _action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>> {
        unsupported(QUEUE)
    }
    fn peek<'a>(&'a self, _at: ShardRef<'a>, _limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)> {
        unsupported(QUEUE)
    }
    fn size<'a>(&'a self, _at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        unsupported(QUEUE)
    }
}
