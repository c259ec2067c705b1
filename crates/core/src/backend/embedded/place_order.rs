//! Sorting a call's new status-index places (a score and an id) into the index's order, before
//! they are joined to the index in one pass (see [`super::ranked::RankedSet::extend_sorted_by`]).
//!
//! A place names its record by its slot; the id is read through `id`. A claim batch brings
//! thousands of places that share their score, with ids that often share a prefix
//! (`item-00123`, `item-00124`, …): a comparison sort would compare strings through a pointer
//! each time. Each place gets an integer key instead (its score, and the 8 bytes of its
//! id that follow the prefix all ids of the run share), the keys are radix sorted on the bytes
//! in which they differ, and ids are compared in full only where two keys are equal.

/// Runs shorter than this are sorted by comparison (the radix passes' fixed cost would dominate).
const RADIX_FROM: usize = 64;

/// A place's sort key and its position in the run.
#[derive(Clone, Copy, Default)]
struct Key {
    /// The score, its sign bit flipped: ordered like the `i64` as an unsigned integer.
    score: u64,
    /// The id's 8 bytes after the shared prefix, big-endian, zero-padded: ordered like the bytes,
    /// a prefix before its extensions (ties are broken by comparing the ids in full).
    head: u64,
    at: u32,
}

/// Sorts `run` by score, then by the id (its bytes) that `id` gives for the place's slot.
pub fn sort_places<'a>(run: &mut [(i64, u32)], id: impl Fn(u32) -> &'a [u8]) {
    if run.len() < RADIX_FROM {
        run.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| id(a.1).cmp(id(b.1))));
        return;
    }
    let skip = shared_prefix(run, &id);
    let mut keys: Vec<Key> = run
        .iter()
        .enumerate()
        .map(|(i, (s, slot))| Key {
            score: (*s as u64) ^ (1 << 63),
            head: head(&id(*slot)[skip..]),
            at: i as u32,
        })
        .collect();
    radix_sort(&mut keys);
    for ties in keys.chunk_by_mut(|a, b| a.score == b.score && a.head == b.head) {
        if ties.len() > 1 {
            ties.sort_unstable_by(|a, b| id(run[a.at as usize].1).cmp(id(run[b.at as usize].1)));
        }
    }
    // Puts the place of `keys[i].at` at `i`, following each cycle of the permutation (the
    // places already moved are found again through the positions they were swapped to).
    for i in 0..keys.len() {
        let mut from = keys[i].at as usize;
        while from < i {
            from = keys[from].at as usize;
        }
        keys[i].at = from as u32;
        run.swap(i, from);
    }
}

/// How many leading bytes every id of `run` shares (counted in bytes: a shared prefix may end
/// inside a character, which the byte order does not mind).
fn shared_prefix<'a>(run: &[(i64, u32)], id: &impl Fn(u32) -> &'a [u8]) -> usize {
    let first = id(run[0].1);
    let mut len = first.len();
    for &(_, slot) in &run[1..] {
        let id = id(slot);
        if !id.starts_with(&first[..len]) {
            len = first[..len].iter().zip(id).take_while(|(a, b)| a == b).count();
            if len == 0 {
                break;
            }
        }
    }
    len
}

fn head(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(b) => u64::from_be_bytes(*b),
        None => {
            let mut b = [0u8; 8];
            b[..bytes.len()].copy_from_slice(bytes);
            u64::from_be_bytes(b)
        }
    }
}

/// Sorts `keys` by (score, head), stably (an LSD radix sort by bytes), with passes only over
/// the bytes in which some keys differ.
fn radix_sort(keys: &mut Vec<Key>) {
    let first = keys[0];
    let (mut diff_score, mut diff_head) = (0u64, 0u64);
    for k in keys.iter() {
        diff_score |= k.score ^ first.score;
        diff_head |= k.head ^ first.head;
    }
    // Least significant digit first: the head's bytes, then the score's.
    let digits: Vec<(bool, u32)> = (0..8)
        .map(|b| (false, 8 * b))
        .chain((0..8).map(|b| (true, 8 * b)))
        .filter(|&(of_score, shift)| (if of_score { diff_score } else { diff_head }) >> shift & 0xff != 0)
        .collect();
    let mut buf = vec![Key::default(); keys.len()];
    for (of_score, shift) in digits {
        let digit = |k: &Key| ((if of_score { k.score } else { k.head }) >> shift & 0xff) as usize;
        let mut at = [0u32; 256];
        for k in keys.iter() {
            at[digit(k)] += 1;
        }
        let mut sum = 0;
        for c in at.iter_mut() {
            (*c, sum) = (sum, sum + *c);
        }
        for k in keys.iter() {
            let d = digit(k);
            buf[at[d] as usize] = *k;
            at[d] += 1;
        }
        std::mem::swap(keys, &mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::{sort_places, RADIX_FROM};

    /// Places of the ids given (each place's slot is its id's position in the list), sorted,
    /// against a full comparison of (score, id).
    fn check(places: Vec<(i64, String)>) {
        let ids: Vec<&str> = places.iter().map(|(_, id)| id.as_str()).collect();
        let mut run: Vec<(i64, u32)> = places.iter().enumerate().map(|(i, (s, _))| (*s, i as u32)).collect();
        sort_places(&mut run, |slot| ids[slot as usize].as_bytes());
        let mut want = places.clone();
        want.sort();
        let got: Vec<(i64, String)> =
            run.iter().map(|&(s, slot)| (s, ids[slot as usize].to_string())).collect();
        assert_eq!(got, want);
    }

    /// The radix sort orders places exactly like comparing them in full: long ids that share
    /// their first 8 bytes after the common prefix, an id and its extensions (also by a NUL
    /// byte), non-ASCII bytes, negative and large scores, repeated places.
    #[test]
    fn sorts_like_a_full_comparison() {
        let ids = [
            "item-000017",
            "item-000007",
            "item-0",
            "item-0\0",
            "item-",
            "b",
            "",
            "item-000",
            "é",
            "item-00",
            "item-00000000000001",
            "item-00000000000000",
        ];
        let mut run: Vec<(i64, String)> = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            run.push(([-3, 0, 5, i64::MAX, i64::MIN][i % 5], id.to_string()));
            run.push((5, id.to_string()));
        }
        check(run.clone());
        // The same at radix sizes: copies of the places, some with more scores.
        let big: Vec<_> = (0..RADIX_FROM * 3)
            .map(|i| (run[i % run.len()].0.saturating_add((i / 40) as i64), run[i % run.len()].1.clone()))
            .collect();
        check(big);
    }

    /// Random runs of ids with a shared prefix of random length, one score or several.
    #[test]
    fn random_runs() {
        let mut rnd = crate::backend::embedded::seeded(7);
        for _ in 0..200 {
            let prefix = "p".repeat(rnd(12) as usize);
            let (n, scores) = (1 + rnd(400), 1 + rnd(3));
            let run: Vec<(i64, String)> = (0..n)
                .map(|_| {
                    let len = rnd(14) as usize;
                    let tail: String = (0..len).map(|_| (b'0' + rnd(3) as u8) as char).collect();
                    (1_000 + rnd(scores) as i64 * 256, format!("{prefix}{tail}"))
                })
                .collect();
            check(run);
        }
    }
}
