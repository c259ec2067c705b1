//! A vector kept in chunks of [`CHUNK`] values (the first one grown like a `Vec` up to that
//! size, every later one allocated at it): growing never copies the values into a larger block,
//! so no freed smaller copy is left in the allocator's heap and no block is more than one chunk
//! larger than what it holds. Values keep their position, addressed like a `Vec`'s.

use std::ops::{Index, IndexMut};

/// Values per chunk: a power of two, so a position splits with a shift and a mask.
const CHUNK: usize = 1024;

pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: Vec::new() }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        match self.chunks.last() {
            Some(last) => (self.chunks.len() - 1) * CHUNK + last.len(),
            None => 0,
        }
    }

    /// Adds `value` at the end and returns its position.
    pub fn push(&mut self, value: T) -> usize {
        let at = self.len();
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => {
                if last.len() == last.capacity() {
                    // The first chunk: doubled like a `Vec`, up to a full chunk.
                    last.reserve_exact(last.len().min(CHUNK - last.len()));
                }
                last.push(value);
            }
            _ => {
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        at
    }

    /// The values' memory, for tests.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    fn index(&self, at: usize) -> &T {
        &self.chunks[at / CHUNK][at % CHUNK]
    }
}

impl<T> IndexMut<usize> for Chunked<T> {
    fn index_mut(&mut self, at: usize) -> &mut T {
        &mut self.chunks[at / CHUNK][at % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::{Chunked, CHUNK};

    /// Values pushed across several chunks read back at their positions, and the blocks hold
    /// at most a chunk more than the values (the first chunk at most twice what it holds).
    #[test]
    fn reads_back_and_stays_close_to_its_size() {
        let mut c = Chunked::default();
        for i in 0..3 * CHUNK + 5 {
            assert_eq!(c.push(i), i);
            assert_eq!(c.len(), i + 1);
            assert!(
                c.capacity() <= (i + 1).max(4) * 2 && c.capacity() <= i + 1 + CHUNK,
                "{i}: {}",
                c.capacity()
            );
        }
        c[7] = 70;
        assert_eq!((c[7], c[CHUNK], c[3 * CHUNK + 4]), (70, CHUNK, 3 * CHUNK + 4));
        assert_eq!(c.iter().count(), c.len());
    }
}
