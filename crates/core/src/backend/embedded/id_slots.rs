//! Values by caller-given id, each in a numbered slot that keeps its number while the value is
//! there, so indexes can name a value by a 4-byte slot number instead of a copy of its id (or a
//! pointer to a shared one). The id is kept once, inline in its slot ([`InlineId`]); the lookup
//! table holds slot numbers only and hashes the ids they point at (foldhash, seeded at random
//! per process: no predictable collisions for ids that come from outside). Freed slots are
//! reused; the memory goes back when the last value leaves.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::chunked::Chunked;
use super::inline_id::InlineId;

struct Slot<V> {
    id: InlineId,
    value: V,
}

pub struct IdSlots<V> {
    /// In chunks: a group of millions of records grows without copying them.
    slots: Chunked<Option<Slot<V>>>,
    /// The free slots' numbers.
    free: Vec<u32>,
    /// The used slots' numbers, found by their id.
    table: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl<V> Default for IdSlots<V> {
    fn default() -> Self {
        IdSlots {
            slots: Chunked::default(),
            free: Vec::new(),
            table: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }
}

/// The slot of a used slot number (every number the table or a caller holds is one).
fn used<V>(slots: &Chunked<Option<Slot<V>>>, n: u32) -> &Slot<V> {
    slots[n as usize].as_ref().expect("a used slot")
}

impl<V> IdSlots<V> {
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Room in the lookup table for `n` more ids (the slots grow a chunk at a time).
    pub fn reserve(&mut self, n: usize) {
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.table.reserve(n, |&s| hasher.hash_one(used(slots, s).id.as_bytes()));
    }

    /// The slot of `id`.
    pub fn find(&self, id: &str) -> Option<u32> {
        let slots = &self.slots;
        self.table
            .find(self.hasher.hash_one(id.as_bytes()), |&s| used(slots, s).id.as_bytes() == id.as_bytes())
            .copied()
    }

    /// Puts `value` under `id`, which must not be there yet, and returns its slot.
    pub fn insert(&mut self, id: &str, value: V) -> u32 {
        debug_assert!(self.find(id).is_none(), "a new id");
        let slot = Some(Slot { id: InlineId::new(id), value });
        let n = match self.free.pop() {
            Some(n) => {
                self.slots[n as usize] = slot;
                n
            }
            None => self.slots.push(slot) as u32,
        };
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.table.insert_unique(hasher.hash_one(id.as_bytes()), n, |&s| {
            hasher.hash_one(used(slots, s).id.as_bytes())
        });
        n
    }

    /// Takes the value out of slot `n` (a used one), which becomes free.
    pub fn remove(&mut self, n: u32) -> V {
        let hash = self.hasher.hash_one(used(&self.slots, n).id.as_bytes());
        if let Ok(e) = self.table.find_entry(hash, |&s| s == n) {
            e.remove();
        }
        let slot = self.slots[n as usize].take().expect("a used slot");
        if self.table.is_empty() {
            // Give the memory back.
            *self = IdSlots { hasher: self.hasher.clone(), ..IdSlots::default() };
        } else {
            self.free.push(n);
        }
        slot.value
    }

    /// The id in slot `n` (a used one), as bytes (ordered like the `str`).
    pub fn id_bytes(&self, n: u32) -> &[u8] {
        used(&self.slots, n).id.as_bytes()
    }

    /// The id in slot `n` (a used one).
    pub fn id(&self, n: u32) -> &str {
        used(&self.slots, n).id.as_str()
    }

    /// The value in slot `n` (a used one).
    pub fn get(&self, n: u32) -> &V {
        &used(&self.slots, n).value
    }

    /// The value in slot `n` (a used one).
    pub fn get_mut(&mut self, n: u32) -> &mut V {
        &mut self.slots[n as usize].as_mut().expect("a used slot").value
    }
}

#[cfg(test)]
impl<V> IdSlots<V> {
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Every used slot: its number, id and value.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str, &V)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(n, s)| s.as_ref().map(|s| (n as u32, s.id.as_str(), &s.value)))
    }
}

#[cfg(test)]
mod tests {
    use super::IdSlots;
    use std::collections::HashMap;

    /// Random inserts and removes against a HashMap: the same ids and values, slots that keep
    /// their number while used and are reused once free, long and short ids.
    #[test]
    fn matches_a_hashmap() {
        let mut rnd = crate::backend::embedded::seeded(99);
        let mut a: IdSlots<u64> = IdSlots::default();
        let mut b: HashMap<String, (u32, u64)> = HashMap::new();
        for step in 0..20_000u64 {
            let id = format!("{}{}", "k".repeat(rnd(2) as usize * 30), rnd(300));
            match (a.find(&id), b.get(&id)) {
                (Some(n), Some(&(m, v))) => {
                    assert_eq!((n, *a.get(n), a.id(n)), (m, v, id.as_str()), "step {step}");
                    if rnd(2) == 0 {
                        assert_eq!(a.remove(n), v);
                        b.remove(&id);
                    } else {
                        *a.get_mut(n) = step;
                        b.insert(id, (n, step));
                    }
                }
                (None, None) => {
                    let n = a.insert(&id, step);
                    assert!(b.values().all(|&(m, _)| m != n), "a used slot given again");
                    b.insert(id, (n, step));
                }
                (x, y) => panic!("step {step}: {x:?} vs {y:?}"),
            }
            assert_eq!(a.len(), b.len());
        }
        for (id, (n, _)) in b.drain() {
            assert_eq!(a.find(&id), Some(n));
            a.remove(n);
        }
        assert!(a.is_empty() && a.slots.capacity() == 0, "the memory goes back once empty");
    }
}
