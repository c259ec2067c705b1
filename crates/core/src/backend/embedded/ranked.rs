//! An ordered set that also answers "how many keys are below this one" and "the key at this
//! position" in O(log n): a treap (a binary search tree kept balanced by random priorities)
//! whose nodes count their subtree. The embedded store pages `listItems` and counts `queueSize`
//! with it in O(log n + page), where a `BTreeSet` would have to walk every key below the page.
//! Nodes live in one vector (freed slots reused), so the set holds no pointers.

const NIL: u32 = u32::MAX;

struct Node<K> {
    /// None only in a freed slot.
    key: Option<K>,
    prio: u64,
    left: u32,
    right: u32,
    size: u32,
}

pub struct RankedSet<K> {
    nodes: Vec<Node<K>>,
    free: Vec<u32>,
    root: u32,
    seed: u64,
}

impl<K: Ord> Default for RankedSet<K> {
    fn default() -> Self {
        RankedSet { nodes: Vec::new(), free: Vec::new(), root: NIL, seed: 0x9E37_79B9_7F4A_7C15 }
    }
}

impl<K: Ord> RankedSet<K> {
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
        self.nodes[t as usize].key.as_ref().expect("a node in the tree holds a key")
    }

    fn fix(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let s = 1 + self.size(n.left) + self.size(n.right);
        self.nodes[t as usize].size = s;
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

    fn next_prio(&mut self) -> u64 {
        // xorshift64*: only the tree's shape depends on it.
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        self.seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn contains(&self, key: &K) -> bool {
        let mut t = self.root;
        while t != NIL {
            match key.cmp(self.key(t)) {
                std::cmp::Ordering::Less => t = self.nodes[t as usize].left,
                std::cmp::Ordering::Greater => t = self.nodes[t as usize].right,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    /// Adds `key`; false (and nothing changed) when it is there already.
    pub fn insert(&mut self, key: K) -> bool {
        if self.contains(&key) {
            return false;
        }
        let prio = self.next_prio();
        let node = Node { key: Some(key), prio, left: NIL, right: NIL, size: 1 };
        let at = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let (l, r) = self.split(self.root, &|s: &Self, x| s.key(x) < s.key(at));
        let l = self.merge(l, at);
        self.root = self.merge(l, r);
        true
    }

    /// Removes `key`; false when it was not there.
    pub fn remove(&mut self, key: &K) -> bool {
        self.take(key).is_some()
    }

    /// Removes `key` and returns it.
    fn take(&mut self, key: &K) -> Option<K> {
        let (l, r) = self.split(self.root, &|s: &Self, x| s.key(x) < key);
        let (m, r) = self.split(r, &|s: &Self, x| s.key(x) <= key);
        let rest = self.merge(l, r);
        self.root = rest;
        if m == NIL {
            return None;
        }
        let node = &mut self.nodes[m as usize];
        node.left = NIL;
        node.right = NIL;
        let k = node.key.take();
        if self.root == NIL {
            // Give the memory back once empty.
            self.nodes = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(m);
        }
        k
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
        let mut t = self.root;
        if t == NIL {
            return None;
        }
        while self.nodes[t as usize].left != NIL {
            t = self.nodes[t as usize].left;
        }
        // Only the first node passes: `l` is that node alone.
        let (l, r) = self.split(self.root, &|_: &Self, x| x == t);
        self.root = r;
        let node = &mut self.nodes[l as usize];
        node.left = NIL;
        node.right = NIL;
        let k = node.key.take();
        if self.root == NIL {
            self.nodes = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(l);
        }
        k
    }

    /// How many keys are before `key` (strictly less).
    pub fn count_below(&self, key: &K) -> usize {
        let mut t = self.root;
        let mut n = 0;
        while t != NIL {
            if self.key(t) < key {
                n += self.size(self.nodes[t as usize].left) as usize + 1;
                t = self.nodes[t as usize].right;
            } else {
                t = self.nodes[t as usize].left;
            }
        }
        n
    }

    /// The keys in order from position `rank` on: O(log n) to start, O(1) amortized per key.
    pub fn iter_from(&self, rank: usize) -> Iter<'_, K> {
        let mut stack = Vec::new();
        let mut t = self.root;
        let mut k = rank as u32;
        while t != NIL {
            let ls = self.size(self.nodes[t as usize].left);
            if k < ls {
                stack.push(t);
                t = self.nodes[t as usize].left;
            } else if k == ls {
                stack.push(t);
                break;
            } else {
                k -= ls + 1;
                t = self.nodes[t as usize].right;
            }
        }
        Iter { set: self, stack }
    }

    pub fn iter(&self) -> Iter<'_, K> {
        self.iter_from(0)
    }
}

pub struct Iter<'a, K> {
    set: &'a RankedSet<K>,
    stack: Vec<u32>,
}

impl<'a, K: Ord> Iterator for Iter<'a, K> {
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
        let mut seed = 12345u64;
        let mut rnd = |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let mut a: RankedSet<(i64, String)> = RankedSet::default();
        let mut b: BTreeSet<(i64, String)> = BTreeSet::new();
        for step in 0..20_000 {
            let k = (rnd(500) as i64, format!("k{}", rnd(20)));
            match rnd(10) {
                0..=4 => assert_eq!(a.insert(k.clone()), b.insert(k)),
                5..=7 => assert_eq!(a.remove(&k), b.remove(&k)),
                8 => assert_eq!(a.pop_first(), b.pop_first()),
                _ => {
                    assert_eq!(a.count_below(&k), b.range(..k.clone()).count());
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
