//! The Semaphore's fast statements (see `fast`): a release and an extension by owner in one
//! statement each, when it releases or extends; any other case runs the call's transaction
//! (`semaphore`).
//!
//! - [`RELEASE`]: the owner's live permit deleted and the release announced (`notify`), as
//!   [`semaphore::release`] says for a held permit. The permit's row is locked first and the time
//!   read after the lock, as the transaction reads it after its locks: a release that waited past
//!   its lease's end is refused. Left to the transaction: every refusal.
//! - [`EXTEND`]: the owner's live permit's lease set to end the lease given after now, as
//!   [`semaphore::extend`] says for a held permit. The name's row is locked first and the time
//!   read after the lock, as the transaction does; the permit's check then reads its newest
//!   version. Left to the transaction: every refusal (and a permit granted after the statement
//!   began, which its snapshot does not show).
//!
//! An acquisition has none: its decision counts the name's live holders after the name's row is
//! locked, and one statement reads every row but the ones it locks as its snapshot held them when
//! it began, before it waited for that lock. A statement so written (measured: eight
//! acquisitions of three permits started together, `semaphore_fast_tests.rs`) granted seven: the
//! holders inserted by the calls it waited for were not in its count. The transaction reads them
//! in a statement that begins after the lock.
//!
//! [`semaphore::release`]: crate::rules::semaphore::release
//! [`semaphore::extend`]: crate::rules::semaphore::extend

use tokio_postgres::types::ToSql;

use super::{notify, Postgres};
use crate::error::Result;
use crate::lock::{ExtendResult, ReleaseResult};
use crate::rules::semaphore;
use crate::wakeup::Topic;

/// A release by owner: `$1` ns, `$2` name, `$3` owner, `$4` the channel, `$5` the payload. A row
/// when released; none: refused, and the transaction tells why.
pub(super) const RELEASE: &str =
    "WITH r AS (SELECT 1 FROM {s}.sem_holders WHERE ns = $1 AND name = $2 AND owner = $3 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now FROM (SELECT count(*) FROM r) z),
  d AS (DELETE FROM {s}.sem_holders o USING k
    WHERE o.ns = $1 AND o.name = $2 AND o.owner = $3 AND o.exp > k.now RETURNING 1)
SELECT pg_notify($4, $5)::text FROM d";

/// An extension by owner: `$1` ns, `$2` name, `$3` owner, `$4` the lease (ms). A row when
/// extended; none: refused, and the transaction tells why.
pub(super) const EXTEND: &str = "WITH r AS (SELECT 1 FROM {s}.sems WHERE ns = $1 AND name = $2 FOR UPDATE),
  k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now
    FROM (SELECT count(*) AS n FROM r) z WHERE z.n > 0),
  u AS (UPDATE {s}.sem_holders AS o SET exp = k.now + $4 FROM k
    WHERE o.ns = $1 AND o.name = $2 AND o.owner = $3 AND o.exp > k.now RETURNING 1)
SELECT 1 FROM u";

impl Postgres {
    /// An extension by owner by [`EXTEND`]; `None`: the transaction decides it.
    pub(super) async fn extend_permit_fast(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
    ) -> Result<Option<ExtendResult>> {
        let lease = lease_ms as i64;
        let params: [&(dyn ToSql + Sync); 4] = [&self.ns.as_bytes(), &name.as_bytes(), &owner, &lease];
        if self.one_statement(EXTEND, &params, None).await?.is_empty() {
            return Ok(None);
        }
        Ok(Some(semaphore::extend(true, lease_ms)))
    }

    /// A release by owner by [`RELEASE`]; `None`: the transaction decides it.
    pub(super) async fn release_permit_fast(&self, name: &str, owner: &str) -> Result<Option<ReleaseResult>> {
        let payload = notify::payload(Topic::Permit, &self.ns, name);
        let params: [&(dyn ToSql + Sync); 5] =
            [&self.ns.as_bytes(), &name.as_bytes(), &owner, &self.schema, &payload];
        if self.one_statement(RELEASE, &params, None).await?.is_empty() {
            return Ok(None);
        }
        Ok(Some(semaphore::release(true)))
    }
}
