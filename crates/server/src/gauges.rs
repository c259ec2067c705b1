//! The state gauges of `/metrics`, read at each scrape: locks held, items by group and status, ids
//! by queue and state, rate limiters in use, holders by semaphore. Bounded: at most [`MAX_NAMES`] names of each kind are read per scrape (in
//! at most [`MAX_PAGES`] catalog pages, then one read per name); `flowguard_listing_complete{kind}`
//! tells whether every name was seen. A backend error leaves these gauges out and sets `flowguard_state_up` 0;
//! the call counters are answered all the same.

use flowguard_core::catalog::{Entry, Kind};
use flowguard_core::queue::ShardSelect;
use flowguard_core::Client;
use prometheus::{Encoder, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

/// The most names of each kind a scrape reads (label values of the per-group and per-queue
/// gauges, so it also bounds the series a scrape exports).
pub const MAX_NAMES: usize = 200;
/// The most catalog pages a scrape reads per kind: on Redis, pages of few names can each take a
/// SCAN of the whole slice of the keyspace they cover.
const MAX_PAGES: usize = 4;

/// Up to [`MAX_NAMES`] names of `kind`, and whether that was all of them.
async fn names(client: &Client, kind: Kind) -> flowguard_core::Result<(Vec<Entry>, bool)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let p = client.list_names(kind, cursor.as_deref(), Some(MAX_NAMES as u64)).await?;
        out.extend(p.entries);
        cursor = p.cursor;
        if cursor.is_none() || out.len() >= MAX_NAMES {
            break;
        }
    }
    let complete = cursor.is_none() && out.len() <= MAX_NAMES;
    out.truncate(MAX_NAMES);
    Ok((out, complete))
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(g.clone())).expect("metric registered once");
    g
}

async fn collect(client: &Client, r: &Registry) -> flowguard_core::Result<()> {
    let complete = gauge_vec(
        r,
        "flowguard_listing_complete",
        "1 when every name of the kind was read for these gauges, 0 when the scrape stopped at its bound",
        &["kind"],
    );
    let items = gauge_vec(r, "flowguard_items", "Tracked items by group and status", &["group", "status"]);
    let (groups, all) = names(client, Kind::Groups).await?;
    complete.with_label_values(&["groups"]).set(all as i64);
    for g in groups {
        let c = client.list_items(&g.name, Some("all"), None, Some(1)).await?.counts;
        for (status, n) in [
            ("in_progress", c.in_progress),
            ("abandoned", c.abandoned),
            ("completed", c.completed),
            ("failed", c.failed),
        ] {
            items.with_label_values(&[g.name.as_str(), status]).set(n as i64);
        }
    }
    let held = IntGauge::new("flowguard_locks_held", "Locks held now").expect("valid metric");
    r.register(Box::new(held.clone())).expect("metric registered once");
    let (locks, all) = names(client, Kind::Locks).await?;
    complete.with_label_values(&["locks"]).set(all as i64);
    held.set(locks.len() as i64);
    let ids = gauge_vec(
        r,
        "flowguard_queue_ids",
        "Queued ids by queue and state: waiting (due or not), due, claimed, again (enqueued while claimed)",
        &["queue", "state"],
    );
    let (queues, all) = names(client, Kind::Queues).await?;
    complete.with_label_values(&["queues"]).set(all as i64);
    for q in queues {
        let select = ShardSelect { shards: q.shards.map(u64::from), shard: None };
        // A queue emptied and taken up with another shard count since it was listed is skipped.
        let Ok(s) = client.queue_size(&q.name, select).await else { continue };
        for (state, n) in [("waiting", s.waiting), ("due", s.due), ("claimed", s.claimed), ("again", s.again)]
        {
            ids.with_label_values(&[q.name.as_str(), state]).set(n as i64);
        }
    }
    let limiters =
        IntGauge::new("flowguard_limiters_in_use", "Rate limiters not full again yet").expect("valid metric");
    r.register(Box::new(limiters.clone())).expect("metric registered once");
    let (names_in_use, all) = names(client, Kind::Limiters).await?;
    complete.with_label_values(&["limiters"]).set(all as i64);
    limiters.set(names_in_use.len() as i64);
    let holders = gauge_vec(r, "flowguard_semaphore_holders", "Live holders by semaphore", &["semaphore"]);
    let (semaphores, all) = names(client, Kind::Semaphores).await?;
    complete.with_label_values(&["semaphores"]).set(all as i64);
    for s in semaphores {
        let i = client.get_semaphore(&s.name).await?;
        holders.with_label_values(&[s.name.as_str()]).set(i.holders.len() as i64);
    }
    Ok(())
}

/// The gauges in the text exposition format.
pub async fn render(client: &Client) -> String {
    let read = Registry::new();
    let ok = collect(client, &read).await.is_ok();
    // A failed read leaves no partial gauges behind.
    let r = if ok { read } else { Registry::new() };
    let up = IntGauge::new("flowguard_state_up", "1 when the state gauges could be read from the backend")
        .expect("valid metric");
    up.set(ok as i64);
    r.register(Box::new(up)).expect("metric registered once");
    let mut buf = Vec::new();
    let _ = TextEncoder::new().encode(&r.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}
