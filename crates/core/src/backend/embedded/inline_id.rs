//! A caller-given name kept in place: up to [`INLINE`] bytes inside the value itself (24 bytes
//! in all, no allocation: the usual item id), a longer one in one boxed allocation. Compared and
//! hashed by its bytes, which order like the `str` they hold.

/// The longest name kept inline.
pub const INLINE: usize = 22;

pub enum InlineId {
    Inline { len: u8, bytes: [u8; INLINE] },
    Boxed(Box<str>),
}

impl InlineId {
    pub fn new(id: &str) -> InlineId {
        match id.len() {
            n if n <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..n].copy_from_slice(id.as_bytes());
                InlineId::Inline { len: n as u8, bytes }
            }
            _ => InlineId::Boxed(id.into()),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            InlineId::Inline { len, bytes } => &bytes[..*len as usize],
            InlineId::Boxed(s) => s.as_bytes(),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            // Copied whole from a `str`, so always valid UTF-8 (the fallback is never taken).
            InlineId::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default()
            }
            InlineId::Boxed(s) => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{InlineId, INLINE};

    /// Short names stay inline, longer ones are boxed; each reads back as given, and the value
    /// takes 24 bytes.
    #[test]
    fn reads_back_inline_or_boxed() {
        assert_eq!(std::mem::size_of::<InlineId>(), 24);
        let long = "é".repeat(INLINE);
        for id in ["", "order-0000001", &"x".repeat(INLINE), &"x".repeat(INLINE + 1), &long] {
            let v = InlineId::new(id);
            assert_eq!(v.as_str(), id);
            assert_eq!(v.as_bytes(), id.as_bytes());
            assert_eq!(matches!(v, InlineId::Inline { .. }), id.len() <= INLINE, "{id}");
        }
    }
}
