//! Redis key layout.
//!
//! Every key is `<prefix>{<kind>:<escaped name>}<suffix>`. The part in braces is the Redis Cluster
//! hash tag, so all keys of one group (or lock, queue shard, state key) share one hash slot.
//! Escaping `%`, `{`, `}` and `:` in the name is injective and leaves no `}` inside the tag, so
//! distinct names never share a key whatever characters they hold. Item ids are fields of their
//! group's record hash and need no escaping.

use crate::error::{Error, Result};

pub const DEFAULT_PREFIX: &str = "fg:";
pub const MAX_PREFIX_BYTES: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Keys {
    prefix: String,
}

pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for ch in name.chars() {
        match ch {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}

/// The name [`escape`] was given, or None when `s` is not an escaped name.
pub fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['%', '{', '}', ':']) {
        out.push_str(&rest[..i]);
        let code = rest.get(i..i + 3)?;
        out.push(match code {
            "%25" => '%',
            "%7B" => '{',
            "%7D" => '}',
            "%3A" => ':',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// `s` with the glob characters of a `SCAN … MATCH` pattern escaped.
pub fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

impl Keys {
    pub fn new(prefix: &str) -> Result<Keys> {
        if prefix.len() > MAX_PREFIX_BYTES {
            return Err(Error::invalid(format!(
                "prefix is {} bytes long; the limit is {MAX_PREFIX_BYTES}",
                prefix.len()
            )));
        }
        if prefix.contains('{') || prefix.contains('}') {
            return Err(Error::invalid(
                "prefix must not contain '{' or '}': flowguard places its own Redis Cluster hash tags",
            ));
        }
        Ok(Keys { prefix: prefix.to_string() })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>{<kind>:<escaped name>}`: the common head of every key of one named thing.
    pub fn tagged(&self, kind: &str, name: &str) -> String {
        let esc = escape(name);
        let mut k = String::with_capacity(self.prefix.len() + kind.len() + esc.len() + 3);
        k.push_str(&self.prefix);
        k.push('{');
        k.push_str(kind);
        k.push(':');
        k.push_str(&esc);
        k.push('}');
        k
    }

    /// Item tracker: the records of a group, a hash of item id -> record. Ids are hash fields,
    /// so any id is distinct.
    pub fn item_records(&self, group_head: &str) -> String {
        format!("{group_head}:r")
    }

    /// Item tracker: the tree hash of a group's compact layout (`docs/redis-compact.md`); its
    /// root, leaves and record buckets are named after it.
    pub fn item_compact(&self, group_head: &str) -> String {
        format!("{group_head}:c")
    }

    /// Item tracker: the per-status index of a group (`in_progress`, `completed`, `failed`).
    pub fn item_index(&self, group_head: &str, status: &str) -> String {
        format!("{group_head}:s:{status}")
    }

    pub fn tracker_group(&self, group: &str) -> String {
        self.tagged("t", group)
    }

    pub fn lock(&self, name: &str) -> String {
        self.tagged("l", name)
    }

    pub fn lock_fence(&self, name: &str) -> String {
        format!("{}:fence", self.tagged("l", name))
    }

    /// Dedup Queue: the head of one shard, `<prefix>{q:<escaped name>:<shard>}`. Each shard is
    /// its own hash tag (escaped names hold no `:`), so shards spread over cluster slots while
    /// all keys of one shard share its slot.
    pub fn queue_shard(&self, queue: &str, shard: u32) -> String {
        format!("{}{{q:{}:{shard}}}", self.prefix, escape(queue))
    }

    /// Dedup Queue: one key of a shard: `w` waiting (score: due time), `c` claimed (score:
    /// visibility deadline), `o` owners of claims, `a` ids enqueued again while claimed (score:
    /// due time), `n` the shard's mark (the queue's shard count, present while the shard holds
    /// ids), `f` first-enqueue times of capped debounces (only for ids that had one), `d`
    /// delivery counts (only of ids a read with `maxDeliveries` claimed) and `x` dead letters
    /// (score: when each died); the scripts name `d` and `x` from the mark's key.
    pub fn queue_key(&self, shard_head: &str, part: char) -> String {
        format!("{shard_head}:{part}")
    }

    /// Dedup Queue: the queue's own record, `<prefix>{q:<escaped name>}:m`, in the queue's own
    /// hash slot (no shard's): the shard count the queue holds ids for and how many of its
    /// shards hold any. Asked only when a shard starts or stops holding ids (a script of its own,
    /// each script within one slot).
    pub fn queue_meta(&self, queue: &str) -> String {
        format!("{}{{q:{}}}:m", self.prefix, escape(queue))
    }

    /// Rate Limiter: the limiter's TAT (µs since the epoch, Redis time), expiring when reached.
    pub fn limiter(&self, name: &str) -> String {
        self.tagged("rl", name)
    }

    /// Rate Limiter: the limiter's pause end (µs since the epoch, Redis time), expiring when
    /// reached; `<limiter key>:p`, in the limiter's hash slot.
    pub fn limiter_pause(&self, name: &str) -> String {
        format!("{}:p", self.tagged("rl", name))
    }

    /// Semaphore: `h` holders (owner -> lease end, ms), `p:<owner>` a holder's permit (its fence
    /// and label, expiring at the lease's end), `fence` the counter of fencing tokens (made from
    /// the clock and kept `FENCE_KEEP_MS`, as a lock's).
    pub fn semaphore(&self, name: &str, part: &str) -> String {
        format!("{}:{part}", self.tagged("sem", name))
    }

    /// Job State: a JSON value or counter.
    pub fn state(&self, key: &str) -> String {
        self.tagged("s", key)
    }

    /// Job State: an idempotency key (pending marker with owner, then the stored result).
    pub fn idempotency(&self, key: &str) -> String {
        self.tagged("i", key)
    }
}

/// The Redis Cluster hash slot of a key (CRC16/XMODEM of the hash tag, mod 16384).
pub fn hash_slot(key: &[u8]) -> u16 {
    let tag = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(tag) % 16384
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_inverts_escape() {
        for n in ["plain", "a:b", "%7B{}", "100%", "ü:%3A", ""] {
            assert_eq!(unescape(&escape(n)).as_deref(), Some(n));
        }
        assert_eq!(unescape("a%zz"), None);
        assert_eq!(unescape("a:b"), None);
        assert_eq!(glob_escape("fg*[x]?\\"), "fg\\*\\[x\\]\\?\\\\");
    }
    use std::collections::HashSet;

    fn names() -> Vec<String> {
        let mut v: Vec<String> = [
            "a",
            "a:b",
            "a%3Ab",
            "a%b",
            "{a}",
            "a}",
            "{",
            "}",
            "%7B",
            "%",
            ":",
            "::",
            "a:i:b",
            "a:s:x",
            "projekt-ü",
            "日本語",
            "emoji 🚀",
            "x{y}z",
            "%25",
            "a b",
            "A",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.push("k".repeat(1024));
        v.push(format!("{}{{", "k".repeat(1023)));
        v
    }

    #[test]
    fn distinct_names_give_distinct_heads_and_keys() {
        let keys = Keys::new("fg:").unwrap();
        let ns = names();
        let heads: HashSet<String> = ns.iter().map(|n| keys.tracker_group(n)).collect();
        assert_eq!(heads.len(), ns.len());
        let mut all = HashSet::new();
        for g in &ns {
            let head = keys.tracker_group(g);
            assert!(all.insert(keys.item_records(&head)), "collision for group {g:?}");
            for s in ["in_progress", "completed", "failed"] {
                assert!(all.insert(keys.item_index(&head, s)));
            }
        }
        let locks: HashSet<String> = ns.iter().flat_map(|n| [keys.lock(n), keys.lock_fence(n)]).collect();
        assert_eq!(locks.len(), ns.len() * 2);
        assert!(locks.is_disjoint(&all));
    }

    #[test]
    fn one_groups_keys_share_a_slot() {
        let keys = Keys::new("fg:").unwrap();
        for g in names() {
            let head = keys.tracker_group(&g);
            let slot = hash_slot(head.as_bytes());
            assert_eq!(hash_slot(keys.item_records(&head).as_bytes()), slot);
            assert_eq!(hash_slot(keys.item_index(&head, "failed").as_bytes()), slot);
        }
        for n in names() {
            assert_eq!(hash_slot(keys.lock(&n).as_bytes()), hash_slot(keys.lock_fence(&n).as_bytes()));
        }
    }

    #[test]
    fn queue_and_state_keys_are_distinct() {
        let keys = Keys::new("fg:").unwrap();
        let ns = names();
        let mut all = HashSet::new();
        for n in &ns {
            for shard in [0u32, 1, 2, 10, 11, 1023] {
                let head = keys.queue_shard(n, shard);
                for part in ['w', 'c', 'o', 'a', 'n', 'f', 'd', 'x'] {
                    assert!(
                        all.insert(keys.queue_key(&head, part)),
                        "collision for queue {n:?} shard {shard}"
                    );
                }
            }
            assert!(all.insert(keys.queue_meta(n)), "queue meta {n:?}");
            assert!(all.insert(keys.state(n)), "state {n:?}");
            assert!(all.insert(keys.idempotency(n)), "idempotency {n:?}");
            assert!(all.insert(keys.lock(n)));
            assert!(all.insert(keys.lock_fence(n)));
            let head = keys.tracker_group(n);
            for s in ["in_progress", "completed", "failed"] {
                assert!(all.insert(keys.item_index(&head, s)));
            }
        }
        // Shard 1 of "a:1" and shard 11 of "a" must not meet (the name's ':' is escaped).
        assert_ne!(keys.queue_shard("a:1", 1), keys.queue_shard("a", 11));
        assert_ne!(keys.queue_shard("a", 1), keys.queue_shard("a:", 1));
    }

    #[test]
    fn one_shards_keys_share_a_slot_and_shards_spread() {
        let keys = Keys::new("fg:").unwrap();
        for n in names() {
            let head = keys.queue_shard(&n, 3);
            let slot = hash_slot(head.as_bytes());
            for part in ['w', 'c', 'o', 'a', 'n', 'f', 'd', 'x'] {
                assert_eq!(hash_slot(keys.queue_key(&head, part).as_bytes()), slot);
            }
        }
        let slots: HashSet<u16> =
            (0..16).map(|i| hash_slot(keys.queue_shard("products", i).as_bytes())).collect();
        assert!(slots.len() > 8, "16 shards landed on only {} slots", slots.len());
    }

    #[test]
    fn slot_matches_redis_reference_values() {
        // Values from the Redis Cluster specification / CLUSTER KEYSLOT.
        assert_eq!(hash_slot(b"123456789"), 12739);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"{user1000}.followers"));
        assert_eq!(hash_slot(b"foo{}{bar}"), hash_slot(b"foo{}{bar}"));
    }

    #[test]
    fn prefix_with_braces_is_refused() {
        assert!(Keys::new("a{b").is_err());
        assert!(Keys::new(&"p".repeat(300)).is_err());
        assert!(Keys::new("").is_ok());
    }
}
