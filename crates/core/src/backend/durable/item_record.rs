//! An item's record as a row of the `items` table, stored compactly: the status as a small
//! number (with the latest claim's `maxAttempts`, when it gave one, in the same column: see
//! [`status_column`]; the schema's comment "0 new, 1 in progress, 2 completed, 3 failed" predates
//! 4 dead and that), the owner token as its 16 bytes, and no timeline where the record's own fields imply
//! it (most items: claimed once, then completed or failed), so a completed item's row holds its
//! key, its times, its attempts and its token and little else. Every field reads back as it was
//! written: a record that is not of that usual shape keeps its timeline as JSON, an owner not of
//! a token's shape is kept as text.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Row, ToSql};

use super::{Fail, Sql};
use crate::rules::tracker::implied_timeline as implied;
use crate::token;
use crate::tracker::{from_status_column, status_column, Record, Word};

/// The stored status and the record's `maxAttempts` as one column (see [`status_column`]: 0
/// and 1 take no byte of a row).
fn status_code(s: &str, max_attempts: Option<u32>) -> Sql<i64> {
    status_column(s, max_attempts).ok_or_else(|| Fail::Corrupt(format!("status {s:?}")))
}

fn status_word(id: &str, code: i64) -> Sql<(Word, Option<u32>)> {
    from_status_column(code).ok_or_else(|| Fail::Corrupt(format!("item {id:?}: status code {code}")))
}

/// The owner column: the token's 16 bytes, or the text of an owner not of a token's shape.
#[derive(Clone)]
pub(super) enum Owner {
    None,
    Token([u8; token::TOKEN_LEN / 2]),
    Text(String),
}

impl Owner {
    fn new(o: Option<&str>) -> Owner {
        match o {
            None => Owner::None,
            Some(o) => token::to_bytes(o).map_or_else(|| Owner::Text(o.to_string()), Owner::Token),
        }
    }

    fn read(id: &str, v: ValueRef<'_>) -> Sql<Option<String>> {
        Ok(match v {
            ValueRef::Null => None,
            ValueRef::Blob(b) => match <&[u8; token::TOKEN_LEN / 2]>::try_from(b) {
                Ok(b) => Some(token::from_bytes(b)),
                Err(_) => return Err(Fail::Corrupt(format!("item {id:?}: owner of {} bytes", b.len()))),
            },
            ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            _ => return Err(Fail::Corrupt(format!("item {id:?}: owner not a token"))),
        })
    }
}

impl ToSql for Owner {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Owner::None => ToSqlOutput::Borrowed(ValueRef::Null),
            Owner::Token(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Owner::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
        })
    }
}

/// A record from the columns `exp, s, a, o, l, c, u, d, e, t, r, n` of `r` (`exp` is the record's `x`),
/// the first of them at column `at`.
pub(super) fn from_row(id: &str, r: &Row<'_>, at: usize) -> Sql<Record> {
    let t: Option<String> = r.get(at + 9)?;
    let (s, m) = status_word(id, r.get(at + 1)?)?;
    let mut rec = Record {
        x: r.get(at)?,
        s,
        m,
        a: r.get(at + 2)?,
        o: Owner::read(id, r.get_ref(at + 3)?)?,
        l: r.get(at + 4)?,
        c: r.get(at + 5)?,
        u: r.get(at + 6)?,
        d: r.get(at + 7)?,
        e: r.get(at + 8)?,
        t: Vec::new(),
        r: r.get(at + 10)?,
        n: r.get(at + 11)?,
    };
    rec.t = match t {
        Some(t) => {
            serde_json::from_str(&t).map_err(|e| Fail::Corrupt(format!("item {id:?}: timeline: {e}")))?
        }
        None => implied(&rec)
            .ok_or_else(|| Fail::Corrupt(format!("item {id:?}: no timeline after {} attempts", rec.a)))?,
    };
    Ok(rec)
}

/// A record's columns as bound (without the record's plain numbers): its status code, its owner
/// and its timeline, encoded once.
#[derive(Clone)]
pub(super) struct Encoded {
    pub s: i64,
    pub o: Owner,
    /// The timeline as JSON; `None` where the record implies it.
    pub t: Option<String>,
}

impl Encoded {
    pub fn new(rec: &Record) -> Sql<Encoded> {
        let t = match implied(rec) {
            Some(t) if t == rec.t => None,
            _ => Some(serde_json::to_string(&rec.t).map_err(|e| Fail::Corrupt(e.to_string()))?),
        };
        Ok(Encoded { s: status_code(&rec.s, rec.m)?, o: Owner::new(rec.o.as_deref()), t })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::tracker::{finish, fresh, take, Take};
    use rusqlite::{params, Connection};

    /// Writes `rec` as a row and reads it back, with the bytes its row's `o` and `t` take.
    fn round_trip(rec: &Record) -> (Record, usize, usize) {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE items(exp, s, a, o, l, c, u, d, e, t, r, n)").unwrap();
        let Ok(e) = Encoded::new(rec) else { panic!("not encoded") };
        c.execute(
            "INSERT INTO items VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            params![rec.x, e.s, rec.a, e.o, rec.l, rec.c, rec.u, rec.d, rec.e, e.t, rec.r, rec.n],
        )
        .unwrap();
        c.query_row("SELECT exp, s, a, o, l, c, u, d, e, t, r, n, length(o), length(t) FROM items", [], |r| {
            let back = from_row("id", r, 0).map_err(|_| rusqlite::Error::InvalidQuery)?;
            Ok((
                back,
                r.get::<_, Option<usize>>(12)?.unwrap_or(0),
                r.get::<_, Option<usize>>(13)?.unwrap_or(0),
            ))
        })
        .unwrap()
    }

    /// Records of every shape read back as written: claimed once (in progress, completed,
    /// failed), finished unclaimed, claimed again after a failure or a lapsed lease, finished
    /// twice, an owner not of a token's shape. Those claimed at most once and finished at most
    /// once keep no timeline in the row, and a token takes 16 bytes.
    #[test]
    fn every_record_reads_back_and_the_usual_ones_keep_no_timeline() {
        let (t0, owner) = (1_764_000_000_000i64, crate::token::new_token());
        let boom = "boom".to_string();
        let claimed = |n: u32| {
            let mut r = fresh(t0);
            for k in 0..n {
                take(&mut r, &owner, t0 + 10 * k as i64, t0 + 10 * k as i64 + 5, 1000, Take::default());
            }
            r
        };
        let done = |mut r: Record, status, error: Option<&String>| {
            finish(&mut r, status, error, t0 + 100, 5000);
            r
        };
        let mut twice = done(claimed(1), "failed", Some(&boom));
        finish(&mut twice, "completed", None, t0 + 200, 5000);
        let mut other_owner = claimed(1);
        other_owner.o = Some("not a token".into());
        let mut limited = claimed(1);
        limited.m = Some(crate::tracker::MAX_ATTEMPTS_LIMIT);
        let mut dead = claimed(1);
        dead.m = Some(1);
        finish(&mut dead, "dead", Some(&boom), t0 + 100, 5000);
        let mut noted = claimed(1);
        noted.n = Some("page 3".into());
        let mut with_result = done(claimed(1), "completed", None);
        with_result.r = Some(r#"{"rows":12}"#.into());
        // (record, whether its row keeps the timeline)
        let cases = [
            (claimed(1), false),
            (done(claimed(1), "completed", None), false),
            (done(claimed(1), "failed", Some(&boom)), false),
            (done(fresh(t0), "completed", None), false),
            (done(fresh(t0), "failed", Some(&boom)), false),
            (claimed(2), true),
            (done(claimed(3), "completed", None), true),
            (twice, true),
            (other_owner, false),
            (limited, false),
            (dead, true),
            (noted, false),
            (with_result, false),
        ];
        for (i, (rec, kept)) in cases.iter().enumerate() {
            let (back, o_len, t_len) = round_trip(rec);
            assert_eq!(&back, rec, "case {i}");
            assert_eq!(t_len > 0, *kept, "case {i}: timeline kept");
            if rec.o.as_deref() == Some(owner.as_str()) {
                assert_eq!(o_len, 16, "case {i}: a token as its bytes");
            }
        }
    }

    /// Through the store: 10,000 items claimed (one batch) and completed with their owner, as a
    /// loop does, take at most 150 bytes of file each (issue 24's target; the layout before took
    /// about 211 with these names), their rows keep no timeline and the token as 16 bytes, and
    /// every item still reads back its status, attempts, finish time and timeline.
    #[tokio::test]
    async fn a_completed_item_takes_at_most_150_bytes_of_file() {
        use crate::backend::durable::{damage, Durability, Durable};
        use crate::tracker::{BatchClaim, ItemOp, ItemStatus, TrackerBackend};
        const N: usize = 10_000;
        let path = damage::temp("bytes.db");
        let d = Durable::open(&path, "fg:", Durability::Process).unwrap();
        let ids: Vec<String> = (0..N).map(|i| format!("order-{i:07}")).collect();
        let claim = BatchClaim {
            ids: &ids,
            owner: &crate::token::new_token(),
            lease_ms: 600_000,
            retention_ms: 30 * 86_400_000,
            reclaim_completed: false,
            max_attempts: None,
            note: None,
        };
        let claimed = d.claim_batch("weekly-sync", claim).await.unwrap();
        let done: Vec<ItemOp> = ids
            .iter()
            .map(|id| ItemOp::Complete {
                id: id.clone(),
                owner: Some(claimed.owner.clone()),
                keep_ms: 30 * 86_400_000,
                result: None,
            })
            .collect();
        for r in d.apply("weekly-sync", &done, 30 * 86_400_000).await.unwrap() {
            assert_eq!(r.outcome, crate::tracker::Outcome::Done, "{}", r.id);
        }
        let item = &d.read("weekly-sync", &ids[..1]).await.unwrap()[0];
        assert_eq!((item.status, item.attempts), (ItemStatus::Completed, 1));
        let steps: Vec<&str> = item.timeline.iter().map(|t| &*t.status).collect();
        assert_eq!(steps, ["in_progress", "completed"]);
        assert_eq!(item.finished_at, Some(item.timeline[1].at));
        drop(d);
        let bytes = damage::checkpointed(&path).len();
        let c = Connection::open(&path).unwrap();
        let (timelines, tokens): (i64, i64) = c
            .query_row("SELECT count(t), sum(length(o) = 16) FROM items", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((timelines, tokens), (0, N as i64));
        assert!(bytes / N <= 150, "{} bytes of file per completed item", bytes / N);
        damage::remove(&path);
    }
}
