//! A table's entries by name: a hash map for the calls, and the names in order for the catalog,
//! which pages from a cursor with a seek instead of a pass over every name. The order is only
//! touched when a name comes or goes, so a call on an existing name costs one hash lookup.

use std::collections::{BTreeSet, HashMap};
use std::ops::{Bound, Index};

type Hasher = foldhash::fast::RandomState;

pub struct Named<V> {
    map: HashMap<String, V, Hasher>,
    order: BTreeSet<String>,
}

impl<V> Default for Named<V> {
    fn default() -> Self {
        Named { map: HashMap::default(), order: BTreeSet::new() }
    }
}

impl<V> Named<V> {
    pub fn get(&self, name: &str) -> Option<&V> {
        self.map.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.map.get_mut(name)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn insert(&mut self, name: &str, value: V) -> Option<V> {
        let old = self.map.insert(name.to_string(), value);
        if old.is_none() {
            self.order.insert(name.to_string());
        }
        old
    }

    pub fn remove(&mut self, name: &str) -> Option<V> {
        let old = self.map.remove(name);
        if old.is_some() {
            self.order.remove(name);
        }
        old
    }

    /// The entry of `name`, made by `make` when there is none.
    pub fn get_or_insert_with(&mut self, name: &str, make: impl FnOnce() -> V) -> &mut V {
        if !self.map.contains_key(name) {
            self.insert(name, make());
        }
        self.map.get_mut(name).expect("inserted above")
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.map.values()
    }

    /// The names in order.
    #[cfg(test)]
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// The entries after `cursor` (all of them without one), in name order: a seek, then one
    /// hash lookup per entry taken.
    pub fn after<'a>(&'a self, cursor: Option<&'a str>) -> impl Iterator<Item = (&'a str, &'a V)> {
        let from = cursor.map_or(Bound::Unbounded, Bound::Excluded);
        self.order
            .range::<str, _>((from, Bound::Unbounded))
            .filter_map(|n| Some((n.as_str(), self.map.get(n)?)))
    }
}

impl<V> Index<&str> for Named<V> {
    type Output = V;

    fn index(&self, name: &str) -> &V {
        &self.map[name]
    }
}

#[cfg(test)]
mod tests {
    use super::Named;

    #[test]
    fn the_order_follows_the_entries() {
        let mut n = Named::default();
        for name in ["c", "a", "d", "b"] {
            assert_eq!(n.insert(name, name.len()), None);
        }
        assert_eq!(n.insert("a", 9), Some(1));
        assert_eq!(n.remove("c"), Some(1));
        assert_eq!(n.remove("c"), None);
        *n.get_or_insert_with("e", || 0) += 5;
        *n.get_or_insert_with("e", || 0) += 5;
        assert_eq!(n.keys().collect::<Vec<_>>(), ["a", "b", "d", "e"]);
        assert_eq!(n.after(Some("a")).collect::<Vec<_>>(), [("b", &1), ("d", &1), ("e", &10)]);
        assert_eq!(n.after(Some("bz")).map(|(k, _)| k).collect::<Vec<_>>(), ["d", "e"]);
        assert_eq!(n.after(None).count(), n.len());
        assert_eq!(n["a"], 9);
    }
}
