//! Range reads whose end and order are checked here, not in the SQL.
//!
//! SQLite ends a range scan silently (fewer rows, no error) when the record it compares with the
//! range's end is damaged (the comparison's corruption flag is not looked at), while reading that
//! record's columns fails with `SQLITE_CORRUPT`; a count over a range stops the same way. So a
//! range is read with only its start in the SQL, in the order of the index it walks, through
//! [`scan`]: the rows are read up to the first one past the range, their keys must come in the
//! index's order (damaged key bytes read as a key out of order, inside or past the range), and
//! the row after the first one past the range must not be back before it. A damaged page fails
//! the call with `ERR_STORAGE` instead of shortening the range.

use rusqlite::{Row, Rows};

use super::{Fail, Sql};

/// Reads `rows` (a statement with only a start bound, ordered by the key that `key` reads from a
/// row) while `inside` says a row's key is in the range, handing each row to `take` until it
/// returns false (enough). `what` names the range in the error of a damaged page.
pub(super) fn scan<K: PartialOrd>(
    mut rows: Rows<'_>,
    key: impl Fn(&Row<'_>) -> rusqlite::Result<K>,
    inside: impl Fn(&K) -> bool,
    what: impl Fn() -> String,
    mut take: impl FnMut(&K, &Row<'_>) -> Sql<bool>,
) -> Sql<()> {
    let out_of_order = || Fail::Corrupt(format!("keys out of order in {}", what()));
    let mut last: Option<K> = None;
    while let Some(r) = rows.next()? {
        let k = key(r)?;
        if last.as_ref().is_some_and(|l| &k <= l) {
            return Err(out_of_order());
        }
        if !inside(&k) {
            // Past the range, unless the row after it is back before it.
            return match rows.next()? {
                Some(next) if key(next)? <= k => Err(out_of_order()),
                _ => Ok(()),
            };
        }
        if !take(&k, r)? {
            return Ok(());
        }
        last = Some(k);
    }
    Ok(())
}
