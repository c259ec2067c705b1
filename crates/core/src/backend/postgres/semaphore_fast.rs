//! The Semaphore's fast statement (see `fast`): a release by owner in one statement, when it
//! releases; any other case runs the call's transaction (`semaphore`).
//!
//! [`RELEASE`]: the owner's live permit deleted and the release announced (`notify`), as
//! [`semaphore::release`] says for a held permit. Left to the transaction: every refusal.
//!
//! An acquisition has none: its decision counts the name's live holders after the name's row is
//! locked, and one statement reads every row but the ones it locks as its snapshot held them when
//! it began, before it waited for that lock. A statement so written (measured: eight
//! acquisitions of three permits started together, `semaphore_fast_tests.rs`) granted seven: the
//! holders inserted by the calls it waited for were not in its count. The transaction reads them
//! in a statement that begins after the lock.
//!
//! [`semaphore::release`]: crate::rules::semaphore::release

use tokio_postgres::types::ToSql;

use super::{notify, Postgres};
use crate::error::Result;
use crate::lock::ReleaseResult;
use crate::rules::semaphore;
use crate::wakeup::Topic;

/// A release by owner: `$1` ns, `$2` name, `$3` owner, `$4` the channel, `$5` the payload. A row
/// when released; none: refused, and the transaction tells why.
pub(super) const RELEASE: &str =
    "WITH k AS (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now),
  r AS (DELETE FROM {s}.sem_holders o USING k
    WHERE o.ns = $1 AND o.name = $2 AND o.owner = $3 AND o.exp > k.now RETURNING 1)
SELECT pg_notify($4, $5)::text FROM r";

impl Postgres {
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
