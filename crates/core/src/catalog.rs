//! Catalog: the names in use — tracker groups that hold records, locks held now, queues that hold
//! ids (with their shard count), rate limiters in use, semaphores held — listed a page at a time, for dashboards and metrics.
//!
//! Every call does bounded work: one page of at most [`MAX_CATALOG_LIMIT`] names, found in at
//! most [`MAX_STEPS`] backend steps, each of which looks at a bounded slice of what is stored
//! (the names of one kind in memory, an index seek per name on the durable store, a `SCAN` step
//! of about a thousand keys on Redis). A page can hold fewer names than asked for (the slices
//! held fewer) while a `cursor` says there is more. Pages follow the name order on the embedded
//! stores and Redis's SCAN order there; a name added or removed while paging may be seen or
//! missed, and Redis may repeat a name across pages (never within one).

use crate::backend::BoxFuture;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::validate;

/// Default and largest page of a listing.
pub const DEFAULT_CATALOG_LIMIT: u64 = 100;
pub const MAX_CATALOG_LIMIT: u64 = 1_000;
/// The most backend steps one listing call takes to fill its page.
pub const MAX_STEPS: usize = 8;
/// The longest cursor: a name, or a SCAN cursor and a name.
pub const MAX_CURSOR_BYTES: usize = validate::MAX_NAME_BYTES + 32;

/// What to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Item Tracker groups that hold records.
    Groups,
    /// Locks held now.
    Locks,
    /// Dedup queues that hold ids (waiting or claimed).
    Queues,
    /// Rate limiters not full again yet (tokens taken within their refill time).
    Limiters,
    /// Semaphores with live holders.
    Semaphores,
}

/// One listed name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// For a queue: the shard count it holds ids for (what its size and peek calls must pass).
    pub shards: Option<u32>,
}

/// One page of names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    pub entries: Vec<Entry>,
    /// Where the next page starts; None when the listing is complete.
    pub cursor: Option<String>,
}

/// What a backend must do for the catalog: one bounded step.
pub trait CatalogBackend {
    /// Up to about `limit` names of `kind` after `cursor` (None: from the start), and the cursor
    /// of the rest (None: no more). A cursor is only meaningful to the backend that made it.
    fn list_names<'a>(&'a self, kind: Kind, cursor: Option<&'a str>, limit: u64) -> BoxFuture<'a, Page>;
}

impl Client {
    /// A page of the names of `kind` in use, starting at `cursor` (from a previous page).
    pub async fn list_names(&self, kind: Kind, cursor: Option<&str>, limit: Option<u64>) -> Result<Page> {
        let limit = validate::range("limit", limit.unwrap_or(DEFAULT_CATALOG_LIMIT), 1, MAX_CATALOG_LIMIT)?;
        if let Some(c) = cursor {
            // A name, or on Redis a SCAN cursor and a name.
            if c.is_empty() || c.len() > MAX_CURSOR_BYTES {
                return Err(Error::invalid_at(
                    "cursor",
                    format!("must be a cursor a page returned (1 to {MAX_CURSOR_BYTES} bytes)"),
                ));
            }
        }
        let mut page = Page { entries: Vec::new(), cursor: cursor.map(str::to_string) };
        for step in 0..MAX_STEPS {
            let want = limit - page.entries.len() as u64;
            let at = if step == 0 { cursor } else { page.cursor.as_deref() };
            let next = self.backend().list_names(kind, at, want).await?;
            page.entries.extend(next.entries);
            page.cursor = next.cursor;
            if page.cursor.is_none() || page.entries.len() as u64 >= limit {
                break;
            }
        }
        Ok(page)
    }
}
