//! For tests: store files with damaged pages, as a disk or a copy gone wrong leaves them.

use std::path::{Path, PathBuf};

use super::{Durability, Durable};
use crate::error::{ErrorCode, Result};

/// A new folder's path `name`.
pub(super) fn temp(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("fg-damaged-{}-{}", std::process::id(), rand::random::<u32>()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The bytes of the store file at `path` with its log copied into it (no -wal file needed).
pub(super) fn checkpointed(path: &Path) -> Vec<u8> {
    let c = rusqlite::Connection::open(path).unwrap();
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    drop(c);
    std::fs::read(path).unwrap()
}

/// 24 places in the middle of a file of `len` bytes (a page's header, cells or content).
pub(super) fn middle(len: usize) -> Vec<usize> {
    (0..24).map(|n| len / 2 - 24_000 + n * 2_000).collect()
}

/// 64 places spread evenly over a file of `len` bytes, after its first two pages.
pub(super) fn across(len: usize) -> Vec<usize> {
    (0..64).map(|n| 8_192 + n * (len - 8_192 - 64) / 64).collect()
}

/// Copies of `good`, each with 64 bytes overwritten by pseudo-random ones at one of `places`:
/// (the place, the copy's path).
pub(super) fn copies(good: &[u8], places: &[usize]) -> Vec<(usize, PathBuf)> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    places
        .iter()
        .enumerate()
        .map(|(n, &at)| {
            let mut bytes = good.to_vec();
            for b in &mut bytes[at..at + 64] {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = seed as u8;
            }
            let path = temp(&format!("damaged-{n}.db"));
            std::fs::write(&path, &bytes).unwrap();
            (at, path)
        })
        .collect()
}

/// Removes the folder of `path` (made by [`temp`]).
pub(super) fn remove(path: &Path) {
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// Opens each damaged copy of the store at `path` (see [`copies`], damaged at the places
/// `places` gives for the file's length) and runs `read` on it, given the place of the damage:
/// opening and reading either succeed or fail with ERR_STORAGE naming the copy. How many copies
/// failed. The copies and the folder of `path` are removed.
pub(super) async fn failures(
    path: &Path,
    places: fn(usize) -> Vec<usize>,
    mut read: impl AsyncFnMut(usize, &Durable) -> Result<()>,
) -> usize {
    let mut failed = 0;
    let good = checkpointed(path);
    for (at, copy) in copies(&good, &places(good.len())) {
        let out = match Durable::open(&copy, "fg:", Durability::Process) {
            Ok(d) => read(at, &d).await,
            Err(e) => Err(e),
        };
        remove(&copy);
        if let Err(e) = out {
            assert_eq!(e.code, ErrorCode::Storage, "{e}");
            assert!(e.message.contains(&copy.display().to_string()), "{e}");
            failed += 1;
        }
    }
    remove(path);
    failed
}
