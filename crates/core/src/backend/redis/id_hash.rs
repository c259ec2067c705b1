//! The hash that places a completed item's record in one of its group's record buckets on Redis
//! (`lua/tracker_crec.lua`): 32-bit FNV-1a over the id's UTF-8 bytes. The scripts get it from
//! here, packed (4 bytes per id, little-endian, in the ids' order), so no script hashes an id on
//! the way of a call; `tracker_crec.lua` computes the same function only to split a bucket.
//! (The Dedup Queue's shard hash, `queue::fnv1a`, is over UTF-16 code units, as npm `fnv1a`:
//! another function, for another purpose.)

const OFFSET: u32 = 0x811c_9dc5;
const PRIME: u32 = 0x0100_0193;

/// 32-bit FNV-1a over the bytes of `id`.
pub fn id_hash(id: &str) -> u32 {
    id.bytes().fold(OFFSET, |h, b| (h ^ u32::from(b)).wrapping_mul(PRIME))
}

/// The hashes of `ids`, packed for a script: 4 bytes each, little-endian (`struct.unpack('<I4')`).
pub fn packed<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<u8> {
    ids.into_iter().flat_map(|id| id_hash(id).to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        // FNV-1a 32 test vectors (Fowler/Noll/Vo): "" and "a", "foobar".
        assert_eq!(id_hash(""), 0x811c_9dc5);
        assert_eq!(id_hash("a"), 0xe40c_292c);
        assert_eq!(id_hash("foobar"), 0xbf9c_f968);
        // Over UTF-8 bytes, not UTF-16 units: "é" is the two bytes c3 a9.
        let e = (0x811c_9dc5u32 ^ 0xc3).wrapping_mul(PRIME);
        assert_eq!(id_hash("é"), (e ^ 0xa9).wrapping_mul(PRIME));
    }

    #[test]
    fn packs_little_endian_in_order() {
        let p = packed(["a", "foobar"]);
        assert_eq!(p, [0x2c, 0x29, 0x0c, 0xe4, 0x68, 0xf9, 0x9c, 0xbf]);
    }
}
