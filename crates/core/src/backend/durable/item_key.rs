//! The key of an item's row: its namespace, group and id in one byte string, so
//! SQLite compares two keys with one `memcmp` instead of column by column.
//!
//! The namespace and the group are each written with every 0 byte doubled as `00 FF` and ended
//! by `00 01`; the id follows as it is. That keeps the order of (namespace, group, id) — a shorter
//! name sorts before a longer one it begins, as text does — and no name can run into the next.
//! A group's keys are those after its prefix and before the prefix followed by `FF`, a byte that
//! UTF-8 never holds.

/// The bytes that end a name in a key.
const END: [u8; 2] = [0, 1];

fn push_name(key: &mut Vec<u8>, name: &str) {
    for &b in name.as_bytes() {
        key.push(b);
        if b == 0 {
            key.push(0xFF);
        }
    }
    key.extend_from_slice(&END);
}

/// The start of every key of namespace `ns`.
pub(super) fn namespace(ns: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(ns.len() + 2);
    push_name(&mut key, ns);
    key
}

/// The start of every key of group `group` in namespace `ns`.
pub(super) fn group(ns: &str, group: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(ns.len() + group.len() + 4);
    push_name(&mut key, ns);
    push_name(&mut key, group);
    key
}

/// The key of item `id` of the group whose start is `prefix`.
pub(super) fn item(prefix: &[u8], id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + id.len());
    key.extend_from_slice(prefix);
    key.extend_from_slice(id.as_bytes());
    key
}

/// A bound after every key that starts with `prefix`.
pub(super) fn after_all(prefix: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + 1);
    key.extend_from_slice(prefix);
    key.push(0xFF);
    key
}

/// Reads one name off the front of `key`: the name and the rest, or `None` when the key does not
/// hold a whole name there.
fn take_name(key: &[u8]) -> Option<(String, &[u8])> {
    let mut name = Vec::new();
    let mut i = 0;
    loop {
        match *key.get(i)? {
            0 => match *key.get(i + 1)? {
                0xFF => name.push(0),
                1 => return Some((String::from_utf8(name).ok()?, &key[i + 2..])),
                _ => return None,
            },
            b => {
                name.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
}

/// The namespace, group and id a key is made of; `None` for bytes that are not such a key.
pub(super) fn split(key: &[u8]) -> Option<(String, String, &str)> {
    let (ns, rest) = take_name(key)?;
    let (group, id) = take_name(rest)?;
    Some((ns, group, std::str::from_utf8(id).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, g: &str, id: &str) -> Vec<u8> {
        item(&group(ns, g), id)
    }

    /// Keys sort as their (namespace, group, id) do, names with 0 bytes and names that begin
    /// others included; every key reads back; a group's keys lie between its bounds and no
    /// other key does.
    #[test]
    fn keys_keep_the_order_of_their_parts_and_read_back() {
        let names = ["", "a", "a\0", "a\0b", "a\u{1}", "ab", "b", "\0", "é", "fg:"];
        let mut parts = Vec::new();
        for ns in names.iter().filter(|n| !n.is_empty()) {
            for g in names.iter().filter(|n| !n.is_empty()) {
                for id in names.iter().filter(|n| !n.is_empty()) {
                    parts.push((ns.to_string(), g.to_string(), id.to_string()));
                }
            }
        }
        let mut by_key: Vec<_> = parts.iter().map(|(n, g, i)| (key(n, g, i), (n, g, i))).collect();
        by_key.sort();
        let mut by_parts = parts.clone();
        by_parts.sort();
        let order: Vec<_> = by_key.iter().map(|(_, p)| (p.0.clone(), p.1.clone(), p.2.clone())).collect();
        assert_eq!(order, by_parts);
        for (k, (n, g, i)) in &by_key {
            let (n2, g2, i2) = split(k).unwrap();
            assert_eq!((&n2, &g2, i2), (*n, *g, i.as_str()));
            let (lo, hi) = (group(n, g), after_all(&group(n, g)));
            for (other, (n3, g3, _)) in &by_key {
                let inside = other.as_slice() > lo.as_slice() && other.as_slice() < hi.as_slice();
                assert_eq!(inside, (n3, g3) == (n, g), "{n3:?}/{g3:?} against the bounds of {n:?}/{g:?}");
            }
            let (lo, hi) = (namespace(n), after_all(&namespace(n)));
            for (other, (n3, _, _)) in &by_key {
                let inside = other.as_slice() > lo.as_slice() && other.as_slice() < hi.as_slice();
                assert_eq!(inside, n3 == n);
            }
        }
        assert_eq!(split(b"fg:\0\x02g\0\x01a"), None);
        assert_eq!(split(b"fg:"), None);
    }
}
