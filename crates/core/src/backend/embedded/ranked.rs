//! An ordered set that also answers "how many keys are below this one" and "the key at this
//! position" in O(log n): a treap (a binary search tree kept balanced by random priorities)
//! whose nodes count their subtree. The embedded store pages `listItems` and counts `queueSize`
//! with it in O(log n + page), where a `BTreeSet` would have to walk every key below the page.
//! Nodes live in one chunked vector (freed slots reused), so the set holds no pointers, and
//! growing never copies the nodes.
//!
//! The order is given by a comparison that each ordering call takes (`*_by`), so keys may be
//! small handles ordered by what they point at (the tracker's places: a score and a record's
//! slot, ordered by the score and then the record's id); for keys ordered by themselves the
//! plain methods pass [`Ord::cmp`].

use std::cmp::Ordering;

use super::chunked::Chunked;

const NIL: u32 = u32::MAX;

struct Node<K> {
    /// The default value in a freed slot.
    key: K,
    /// 32 bits: enough for the shape, and a node of a tracker index fits 32 bytes.
    prio: u32,
    left: u32,
    right: u32,
    size: u32,
}

pub struct RankedSet<K> {
    nodes: Chunked<Node<K>>,
    free: Vec<u32>,
    root: u32,
    seed: u64,
}

impl<K> Default for RankedSet<K> {
    fn default() -> Self {
        RankedSet { nodes: Chunked::default(), free: Vec::new(), root: NIL, seed: 0x9E37_79B9_7F4A_7C15 }
    }
}

impl<K: Default> RankedSet<K> {
    pub fn len(&self) -> usize {
        self.size(self.root) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.root == NIL
    }

    fn size(&self, t: u32) -> u32 {
        if t == NIL {
            0
        } else {
            self.nodes[t as usize].size
        }
    }

    fn key(&self, t: u32) -> &K {
        &self.nodes[t as usize].key
    }

    fn fix(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let s = 1 + self.size(n.left) + self.size(n.right);
        self.nodes[t as usize].size = s;
    }

    /// A node for `key`, outside the tree.
    fn alloc(&mut self, key: K) -> u32 {
        let prio = self.next_prio();
        let node = Node { key, prio, left: NIL, right: NIL, size: 1 };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => self.nodes.push(node) as u32,
        }
    }

    /// Frees the slot of `t` (already out of the tree) and returns its key.
    fn release(&mut self, t: u32) -> K {
        let node = &mut self.nodes[t as usize];
        node.left = NIL;
        node.right = NIL;
        let k = std::mem::take(&mut node.key);
        if self.root == NIL {
            // Give the memory back once empty.
            self.nodes = Chunked::default();
            self.free = Vec::new();
        } else {
            self.free.push(t);
        }
        k
    }

    /// Splits `t` into the nodes for which `before` holds (a prefix of the order) and the rest.
    fn split(&mut self, t: u32, before: &impl Fn(&Self, u32) -> bool) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if before(self, t) {
            let (l, r) = self.split(self.nodes[t as usize].right, before);
            self.nodes[t as usize].right = l;
            self.fix(t);
            (t, r)
        } else {
            let (l, r) = self.split(self.nodes[t as usize].left, before);
            self.nodes[t as usize].left = r;
            self.fix(t);
            (l, t)
        }
    }

    /// Joins two treaps, every key of `a` before every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.fix(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.fix(b);
            b
        }
    }

    fn next_prio(&mut self) -> u32 {
        // xorshift64*, its high half: only the tree's shape depends on it.
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        (self.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }

    /// Whether `key` is in the subtree `t`.
    fn holds(&self, mut t: u32, key: &K, cmp: &impl Fn(&K, &K) -> Ordering) -> bool {
        while t != NIL {
            match cmp(key, self.key(t)) {
                Ordering::Less => t = self.nodes[t as usize].left,
                Ordering::Greater => t = self.nodes[t as usize].right,
                Ordering::Equal => return true,
            }
        }
        false
    }

    /// Adds `key` (ordered by `cmp`); false (and nothing changed) when it is there already.
    pub fn insert_by(&mut self, key: K, cmp: &impl Fn(&K, &K) -> Ordering) -> bool {
        let at = self.alloc(key);
        match self.insert_node(self.root, at, cmp) {
            Some(root) => {
                self.root = root;
                true
            }
            None => {
                self.release(at);
                false
            }
        }
    }

    /// Puts node `at` into the subtree `t` and returns the subtree's new root (None, nothing
    /// changed, when the key is there already). The node goes down only as far as its priority
    /// allows, where it takes the split subtree as children: no split or merge of the whole
    /// tree, and only the sizes on the way down change.
    fn insert_node(&mut self, t: u32, at: u32, cmp: &impl Fn(&K, &K) -> Ordering) -> Option<u32> {
        if t == NIL {
            return Some(at);
        }
        if self.nodes[at as usize].prio > self.nodes[t as usize].prio {
            if self.holds(t, self.key(at), cmp) {
                return None;
            }
            let (l, r) = self.split(t, &|s: &Self, x| cmp(s.key(x), s.key(at)).is_lt());
            let node = &mut self.nodes[at as usize];
            node.left = l;
            node.right = r;
            self.fix(at);
            return Some(at);
        }
        let left = match cmp(self.key(at), self.key(t)) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => return None,
        };
        let n = &self.nodes[t as usize];
        let c = self.insert_node(if left { n.left } else { n.right }, at, cmp)?;
        let n = &mut self.nodes[t as usize];
        if left {
            n.left = c;
        } else {
            n.right = c;
        }
        n.size += 1;
        Some(t)
    }

    /// Adds `keys`, given in strictly increasing order (keys already there are skipped). When
    /// no key of the set falls between the first and the last of them (a batch of fresh keys,
    /// the usual case), they are built into a treap in one linear pass and joined at their
    /// place: O(k + log n) instead of k inserts of O(log n) each.
    pub fn extend_sorted_by(&mut self, keys: Vec<K>, cmp: &impl Fn(&K, &K) -> Ordering) {
        let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
            return;
        };
        debug_assert!(
            keys.windows(2).all(|w| cmp(&w[0], &w[1]).is_lt()),
            "keys in strictly increasing order"
        );
        // A few keys go in one by one: cheaper than the two walks, the split and the merges.
        if keys.len() < 4
            || self.count_while(|k| cmp(k, first).is_lt()) != self.count_while(|k| cmp(k, last).is_le())
        {
            for k in keys {
                self.insert_by(k, cmp);
            }
            return;
        }
        let (l, r) = self.split(self.root, &|s: &Self, x| cmp(s.key(x), first).is_lt());
        // A Cartesian tree over the sorted keys: the stack holds the right spine; a node pops
        // the lower-priority nodes above it (its left subtree, complete, so sized on the way).
        let mut spine: Vec<u32> = Vec::new();
        for k in keys {
            let x = self.alloc(k);
            let mut below = NIL;
            while let Some(&top) = spine.last() {
                if self.nodes[top as usize].prio > self.nodes[x as usize].prio {
                    break;
                }
                spine.pop();
                self.fix(top);
                below = top;
            }
            self.nodes[x as usize].left = below;
            if let Some(&top) = spine.last() {
                self.nodes[top as usize].right = x;
            }
            spine.push(x);
        }
        let built = spine[0];
        while let Some(t) = spine.pop() {
            self.fix(t);
        }
        let l = self.merge(l, built);
        self.root = self.merge(l, r);
    }

    /// Removes `key` (ordered by `cmp`); false when it was not there.
    pub fn remove_by(&mut self, key: &K, cmp: &impl Fn(&K, &K) -> Ordering) -> bool {
        match self.delete(self.root, key, cmp) {
            Some((root, gone)) => {
                self.root = root;
                self.release(gone);
                true
            }
            None => false,
        }
    }

    /// Takes the node of `key` out of the subtree `t` (its children merged in its place):
    /// the subtree's new root and the node taken, or None when the key is not there.
    fn delete(&mut self, t: u32, key: &K, cmp: &impl Fn(&K, &K) -> Ordering) -> Option<(u32, u32)> {
        if t == NIL {
            return None;
        }
        let n = &self.nodes[t as usize];
        let (left, child) = match cmp(key, self.key(t)) {
            Ordering::Less => (true, n.left),
            Ordering::Greater => (false, n.right),
            Ordering::Equal => return Some((self.merge(n.left, n.right), t)),
        };
        let (c, gone) = self.delete(child, key, cmp)?;
        let n = &mut self.nodes[t as usize];
        if left {
            n.left = c;
        } else {
            n.right = c;
        }
        n.size -= 1;
        Some((t, gone))
    }

    /// The first key in order.
    pub fn first(&self) -> Option<&K> {
        let mut t = self.root;
        if t == NIL {
            return None;
        }
        while self.nodes[t as usize].left != NIL {
            t = self.nodes[t as usize].left;
        }
        Some(self.key(t))
    }

    /// Removes and returns the first key in order.
    pub fn pop_first(&mut self) -> Option<K> {
        if self.root == NIL {
            return None;
        }
        let (root, gone) = self.delete_first(self.root);
        self.root = root;
        Some(self.release(gone))
    }

    /// Takes the first node out of the non-empty subtree `t`: the new root and the node.
    fn delete_first(&mut self, t: u32) -> (u32, u32) {
        let n = &self.nodes[t as usize];
        if n.left == NIL {
            return (n.right, t);
        }
        let (c, gone) = self.delete_first(n.left);
        let n = &mut self.nodes[t as usize];
        n.left = c;
        n.size -= 1;
        (t, gone)
    }

    /// The one rank walk: down to the first key for which `before(key, rank)` no longer holds
    /// (`before` holds on a prefix of the order), calling `went_left` on each node passed on the
    /// left; returns that key's rank (how many keys are before it).
    fn walk(&self, before: impl Fn(&K, usize) -> bool, mut went_left: impl FnMut(u32)) -> usize {
        let (mut t, mut n) = (self.root, 0);
        while t != NIL {
            let node = &self.nodes[t as usize];
            let rank = n + self.size(node.left) as usize;
            if before(self.key(t), rank) {
                n = rank + 1;
                t = node.right;
            } else {
                went_left(t);
                t = node.left;
            }
        }
        n
    }

    /// How many keys are at the start of the order for which `before` holds (it must hold on a
    /// prefix of the order).
    pub fn count_while(&self, before: impl Fn(&K) -> bool) -> usize {
        self.walk(|k, _| before(k), |_| {})
    }

    /// The keys in order from position `rank` on: O(log n) to start, O(1) amortized per key.
    pub fn iter_from(&self, rank: usize) -> Iter<'_, K> {
        let mut stack = Vec::new();
        self.walk(|_, r| r < rank, |t| stack.push(t));
        Iter { set: self, stack }
    }

    pub fn iter(&self) -> Iter<'_, K> {
        self.iter_from(0)
    }
}

/// The same for keys ordered by themselves.
impl<K: Ord + Default> RankedSet<K> {
    /// Adds `key`; false (and nothing changed) when it is there already.
    pub fn insert(&mut self, key: K) -> bool {
        self.insert_by(key, &K::cmp)
    }

    /// Removes `key`; false when it was not there.
    pub fn remove(&mut self, key: &K) -> bool {
        self.remove_by(key, &K::cmp)
    }

    /// How many keys are before `key` (strictly less).
    pub fn count_below(&self, key: &K) -> usize {
        self.count_while(|k| k < key)
    }
}

pub struct Iter<'a, K> {
    set: &'a RankedSet<K>,
    stack: Vec<u32>,
}

impl<'a, K: Default> Iterator for Iter<'a, K> {
    type Item = &'a K;

    fn next(&mut self) -> Option<&'a K> {
        let t = self.stack.pop()?;
        let mut c = self.set.nodes[t as usize].right;
        while c != NIL {
            self.stack.push(c);
            c = self.set.nodes[c as usize].left;
        }
        Some(self.set.key(t))
    }
}

#[cfg(test)]
mod tests {
    use super::RankedSet;
    use std::collections::BTreeSet;

    /// Random operations against a BTreeSet: the same keys, order, ranks and pages.
    #[test]
    fn matches_a_btreeset() {
        let mut rnd = crate::backend::embedded::seeded(12345);
        let mut a: RankedSet<(i64, String)> = RankedSet::default();
        let mut b: BTreeSet<(i64, String)> = BTreeSet::new();
        for step in 0..20_000 {
            let k = (rnd(500) as i64, format!("k{}", rnd(20)));
            match rnd(10) {
                0..=4 => assert_eq!(a.insert(k.clone()), b.insert(k)),
                5..=7 => assert_eq!(a.remove(&k), b.remove(&k)),
                8 => assert_eq!(a.pop_first(), b.pop_first()),
                9 if rnd(3) == 0 => {
                    // A sorted run of keys with one score, fresh or mixed with keys already there.
                    let score = rnd(520) as i64;
                    let (from, n) = (rnd(20), rnd(12));
                    let mut run: Vec<_> = (from..from + n).map(|i| (score, format!("k{i}"))).collect();
                    run.sort();
                    a.extend_sorted_by(run.clone(), &Ord::cmp);
                    b.extend(run);
                }
                _ => {
                    assert_eq!(a.count_below(&k), b.range(..k.clone()).count());
                    assert_eq!(a.count_while(|x| x.0 <= k.0), b.range(..(k.0 + 1, String::new())).count());
                    let r = rnd(b.len() as u64 + 2) as usize;
                    let page: Vec<_> = a.iter_from(r).take(7).cloned().collect();
                    let want: Vec<_> = b.iter().skip(r).take(7).cloned().collect();
                    assert_eq!(page, want, "step {step}");
                }
            }
            assert_eq!(a.len(), b.len());
            assert_eq!(a.first(), b.first());
        }
        let all: Vec<_> = a.iter().cloned().collect();
        assert_eq!(all, b.iter().cloned().collect::<Vec<_>>());
    }
}
