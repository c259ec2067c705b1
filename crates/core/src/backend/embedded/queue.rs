//! Dedup Queue on the embedded store: a storage adapter around [`crate::rules::queue`] (the
//! Redis scripts `queue_*.lua` write the same rules in Lua).

use std::collections::HashMap;

use super::expiries::SLICE;
use super::ranked::RankedSet;

use super::named::Named;
use super::{guard, now_ms, Embedded};
use crate::backend::{ready, BoxFuture};
use crate::error::Result;
use crate::queue::{
    shard_mismatch, Debounce, EnqueueOutcome, QueueBackend, SettleAction, SettleOutcome, ShardClaim,
    ShardDead, ShardRef, ShardSize,
};
use crate::rules::queue::{self, Deliver, EnqueueWrite};

#[derive(Default)]
struct Shard {
    /// (due time, id) and id -> due time.
    waiting: RankedSet<(i64, String)>,
    due: HashMap<String, i64>,
    /// (visibility deadline, id) and id -> (deadline, owner).
    claimed: RankedSet<(i64, String)>,
    claims: HashMap<String, (i64, String)>,
    /// Claimed ids enqueued again: id -> due time.
    again: HashMap<String, i64>,
    /// The first-enqueue time of a pending enqueue (waiting, or enqueued again while claimed),
    /// only for ids a capped debounce touched (see [`queue::capped`]): dropped when it is claimed.
    first: HashMap<String, i64>,
    /// Delivery counts, only of ids a read with `max_deliveries` claimed (see [`queue::deliver`]);
    /// an ack drops them.
    counts: HashMap<String, u64>,
    /// Dead letters: (died at, id) and id -> (died at, deliveries).
    dead: RankedSet<(i64, String)>,
    died: HashMap<String, (i64, u64)>,
}

impl Shard {
    fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.claimed.is_empty() && self.again.is_empty() && self.dead.is_empty()
    }

    fn wait(&mut self, id: &str, due: i64) {
        if let Some(old) = self.due.insert(id.to_string(), due) {
            self.waiting.remove(&(old, id.to_string()));
        }
        self.waiting.insert((due, id.to_string()));
    }

    fn unclaim(&mut self, id: &str) -> Option<(i64, String)> {
        let c = self.claims.remove(id)?;
        self.claimed.remove(&(c.0, id.to_string()));
        Some(c)
    }

    /// Where `id` is, as the rules read it.
    fn place(&self, id: &str) -> queue::Place<'_> {
        match self.claims.get(id) {
            Some((deadline, owner)) => queue::Place::Claimed(self.claim_of(id, *deadline, owner)),
            None if self.died.contains_key(id) => queue::Place::Dead,
            None => self.due.get(id).map_or(queue::Place::Absent, |&d| queue::Place::Waiting(d)),
        }
    }

    fn claim_of<'a>(&self, id: &str, deadline: i64, owner: &'a str) -> queue::Claim<'a> {
        queue::Claim { deadline, owner, again: self.again.get(id).copied() }
    }

    /// Returns expired claims to waiting (see [`queue::back_at`]): at most `max(SLICE, max)` per
    /// call, so a mass expiry never blocks the event loop in one call (the following calls go
    /// on, as on Redis). A claim whose deadline passed cannot be acked or released, and counts as
    /// waiting and due in `size`.
    fn reap(&mut self, now: i64, max: usize) {
        for _ in 0..SLICE.max(max) {
            match self.claimed.first() {
                Some((deadline, _)) if !queue::live(*deadline, now) => {}
                _ => break,
            }
            let (deadline, id) = self.claimed.pop_first().expect("first exists");
            self.claims.remove(&id);
            let due = queue::back_at(deadline, self.again.remove(&id));
            self.wait(&id, due);
        }
    }
}

/// What a queue records as a whole while any of its shards holds ids.
struct Meta {
    /// The shard count the queue holds ids for.
    shards: u32,
    /// How many of its shards hold ids.
    held: usize,
}

#[derive(Default)]
pub struct QueueTable {
    shards: HashMap<(String, u32), Shard>,
    meta: Named<Meta>,
}

impl QueueTable {
    /// Runs `f` on a shard after checking the caller's shard count against the queue's and
    /// reaping expired claims; keeps the shard only while it holds anything, and the queue's
    /// record only while any shard does (a new record takes the caller's shard count).
    fn with<T>(&mut self, at: ShardRef<'_>, f: impl FnOnce(&mut Shard, i64) -> T) -> Result<T> {
        if let Some(m) = self.meta.get(at.queue) {
            if m.shards != at.shards && m.held > 0 {
                return Err(shard_mismatch(at, m.shards as u64));
            }
        }
        let now = now_ms();
        let key = (at.queue.to_string(), at.shard);
        let was_held = self.shards.contains_key(&key);
        let shard = self.shards.entry(key.clone()).or_default();
        let out = f(shard, now);
        let held = !shard.is_empty();
        if !held {
            self.shards.remove(&key);
        }
        match (was_held, held) {
            (false, true) => {
                let m = self.meta.get_or_insert_with(at.queue, || Meta { shards: at.shards, held: 0 });
                m.shards = at.shards;
                m.held += 1;
            }
            (true, false) => {
                if let Some(m) = self.meta.get_mut(at.queue) {
                    m.held = m.held.saturating_sub(1);
                    if m.held == 0 {
                        self.meta.remove(at.queue);
                    }
                }
            }
            _ => {}
        }
        Ok(out)
    }

    pub fn enqueue(
        &mut self,
        at: ShardRef<'_>,
        ids: &[String],
        delay_ms: u64,
        debounce: Debounce,
    ) -> Result<Vec<(EnqueueOutcome, i64)>> {
        self.with(at, |s, now| {
            let due = queue::due(now, delay_ms);
            ids.iter()
                .map(|id| {
                    let place = s.place(id);
                    let claimed = matches!(place, queue::Place::Claimed(_));
                    let first = s.first.get(id).copied();
                    let d = queue::enqueue(place, debounce, first, due, now);
                    if let (Some(t), true) = (d.first, d.first != first) {
                        s.first.insert(id.clone(), t);
                    }
                    match d.write {
                        EnqueueWrite::Keep => {}
                        EnqueueWrite::Wait(t) => {
                            if claimed {
                                s.unclaim(id);
                                s.again.remove(id);
                            }
                            s.wait(id, t);
                        }
                        EnqueueWrite::Again(t) => match s.again.get_mut(id) {
                            Some(a) => *a = t,
                            None => {
                                s.again.insert(id.clone(), t);
                            }
                        },
                    }
                    (d.outcome, d.due)
                })
                .collect()
        })
    }

    pub fn claim(
        &mut self,
        at: ShardRef<'_>,
        owner: &str,
        limit: u64,
        visibility_ms: u64,
        max_deliveries: Option<u64>,
    ) -> Result<ShardClaim> {
        self.with(at, |s, now| {
            s.reap(now, limit as usize);
            let deadline = queue::lease(now, visibility_ms);
            let mut items = Vec::new();
            // Dead letters made by this call: at most `limit`.
            let mut died = 0;
            while (items.len() as u64) < limit && died < limit {
                match s.waiting.first() {
                    Some((due, _)) if queue::deliverable(*due, now) => {}
                    _ => break,
                }
                let (due, id) = s.waiting.pop_first().expect("first exists");
                s.due.remove(&id);
                if !s.first.is_empty() {
                    s.first.remove(&id);
                }
                if let Some(max) = max_deliveries {
                    let count = s.counts.get(&id).copied().unwrap_or(0);
                    match queue::deliver(count, max) {
                        Deliver::Claim(n) => {
                            s.counts.insert(id.clone(), n);
                        }
                        Deliver::Dead => {
                            s.counts.remove(&id);
                            s.dead.insert((now, id.clone()));
                            s.died.insert(id, (now, count));
                            died += 1;
                            continue;
                        }
                    }
                }
                s.claimed.insert((deadline, id.clone()));
                s.claims.insert(id.clone(), (deadline, owner.to_string()));
                items.push((id, due));
            }
            ShardClaim { visible_until: deadline, items }
        })
    }

    pub fn settle(
        &mut self,
        at: ShardRef<'_>,
        owner: &str,
        ids: &[String],
        action: SettleAction,
    ) -> Result<Vec<(SettleOutcome, Option<i64>)>> {
        self.with(at, |s, now| {
            let out = ids
                .iter()
                .map(|id| {
                    let claim = s.claims.get(id).map(|(deadline, o)| s.claim_of(id, *deadline, o));
                    let (outcome, due) = queue::settle(claim, owner, action, now);
                    if let SettleOutcome::Done { requeued } = outcome {
                        s.unclaim(id);
                        if requeued {
                            s.again.remove(id);
                        }
                        if !queue::keeps_count(action) && !s.counts.is_empty() {
                            s.counts.remove(id);
                        }
                        if let Some(t) = due {
                            s.wait(id, t);
                        }
                    }
                    (outcome, due)
                })
                .collect();
            s.reap(now, ids.len());
            out
        })
    }

    pub fn peek(&mut self, at: ShardRef<'_>, limit: u64) -> Result<(i64, Vec<(String, i64)>)> {
        self.with(at, |s, now| {
            s.reap(now, limit as usize);
            (now, s.waiting.iter().take(limit as usize).map(|(d, id)| (id.clone(), *d)).collect())
        })
    }

    pub fn size(&mut self, at: ShardRef<'_>) -> Result<ShardSize> {
        self.with(at, |s, now| {
            s.reap(now, 0);
            // Claims that expired and are not returned yet count as waiting and due.
            // O(log n): the sets are ranked.
            let up_to_now =
                |set: &RankedSet<(i64, String)>| set.count_below(&(now + 1, String::new())) as u64;
            let expired = up_to_now(&s.claimed);
            ShardSize {
                shard: at.shard,
                waiting: s.waiting.len() as u64 + expired,
                due: up_to_now(&s.waiting) + expired,
                claimed: s.claimed.len() as u64 - expired,
                again: s.again.len() as u64,
                dead: s.dead.len() as u64,
            }
        })
    }

    pub fn dead_letters(&mut self, at: ShardRef<'_>, limit: u64) -> Result<Vec<ShardDead>> {
        self.with(at, |s, _| {
            s.dead
                .iter()
                .take(limit as usize)
                .map(|(died_at, id)| ShardDead {
                    id: id.clone(),
                    deliveries: s.died.get(id).map_or(0, |d| d.1),
                    died_at: *died_at,
                })
                .collect()
        })
    }

    pub fn requeue_dead(&mut self, at: ShardRef<'_>, ids: &[String]) -> Result<Vec<Option<i64>>> {
        self.with(at, |s, now| {
            ids.iter()
                .map(|id| {
                    let was = s.died.remove(id);
                    let due = queue::requeue(was.is_some(), now);
                    if let (Some((t, _)), Some(d)) = (was, due) {
                        s.dead.remove(&(t, id.clone()));
                        s.wait(id, d);
                    }
                    due
                })
                .collect()
        })
    }
}

impl QueueBackend for Embedded {
    fn enqueue<'a>(
        &'a self,
        at: ShardRef<'a>,
        ids: &'a [String],
        delay_ms: u64,
        debounce: Debounce,
    ) -> BoxFuture<'a, Vec<(EnqueueOutcome, i64)>> {
        ready(guard(&self.namespace().queues).enqueue(at, ids, delay_ms, debounce))
    }
    fn claim<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        limit: u64,
        visibility_ms: u64,
        max_deliveries: Option<u64>,
    ) -> BoxFuture<'a, ShardClaim> {
        ready(guard(&self.namespace().queues).claim(at, owner, limit, visibility_ms, max_deliveries))
    }
    fn settle<'a>(
        &'a self,
        at: ShardRef<'a>,
        owner: &'a str,
        ids: &'a [String],
        action: SettleAction,
    ) -> BoxFuture<'a, Vec<(SettleOutcome, Option<i64>)>> {
        ready(guard(&self.namespace().queues).settle(at, owner, ids, action))
    }
    fn peek<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, (i64, Vec<(String, i64)>)> {
        ready(guard(&self.namespace().queues).peek(at, limit))
    }
    fn size<'a>(&'a self, at: ShardRef<'a>) -> BoxFuture<'a, ShardSize> {
        ready(guard(&self.namespace().queues).size(at))
    }
    fn dead_letters<'a>(&'a self, at: ShardRef<'a>, limit: u64) -> BoxFuture<'a, Vec<ShardDead>> {
        ready(guard(&self.namespace().queues).dead_letters(at, limit))
    }
    fn requeue_dead<'a>(&'a self, at: ShardRef<'a>, ids: &'a [String]) -> BoxFuture<'a, Vec<Option<i64>>> {
        ready(guard(&self.namespace().queues).requeue_dead(at, ids))
    }
}

impl QueueTable {
    /// The queues that hold ids after `cursor` in order, with their shard counts (for the catalog).
    pub(super) fn names_after<'a>(&'a self, cursor: Option<&'a str>) -> impl Iterator<Item = (&'a str, u32)> {
        self.meta.after(cursor).map(|(k, m)| (k, m.shards))
    }
}

#[cfg(test)]
mod tests {
    use super::{QueueTable, SLICE};
    use crate::queue::{Debounce, ShardRef};

    /// 2.5 slices of claims expire together: each call returns one slice at most to waiting,
    /// and the counts already show them as waiting and due.
    #[test]
    fn reap_returns_one_slice_per_call() {
        let mut q = QueueTable::default();
        let at = ShardRef { queue: "q", shard: 0, shards: 1 };
        let ids: Vec<String> = (0..2500).map(|i| format!("i{i}")).collect();
        q.enqueue(at, &ids, 0, Debounce::Off).expect("enqueue");
        assert_eq!(q.claim(at, "o", 2500, 1, None).expect("claim").items.len(), 2500);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut left = Vec::new();
        for _ in 0..3 {
            let s = q.size(at).expect("size");
            assert_eq!((s.waiting, s.due, s.claimed), (2500, 2500, 0));
            left.push(q.shards[&("q".to_string(), 0)].claimed.len());
        }
        assert_eq!(left, vec![2500 - SLICE, 2500 - 2 * SLICE, 0]);
        assert_eq!(q.claim(at, "o", 2500, 60_000, None).expect("claim").items.len(), 2500);
    }
}
