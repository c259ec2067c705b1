//! Owner tokens: 128 random bits as 32 lowercase hex characters.

use crate::error::{At, Error, Result};

pub const TOKEN_LEN: usize = 32;

/// A fresh owner token: 128 bits from a cryptographically secure generator (rand's thread-local
/// ChaCha, seeded and periodically reseeded from the operating system), with no system call per
/// token.
pub fn new_token() -> String {
    hex(&rand::random::<u128>().to_le_bytes())
}

/// The 16 bytes a token is the hex of; `None` for a string not of a token's shape (32 lowercase
/// hex characters). [`from_bytes`] gives the token back.
pub fn to_bytes(token: &str) -> Option<[u8; TOKEN_LEN / 2]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let t = token.as_bytes();
    if t.len() != TOKEN_LEN {
        return None;
    }
    let mut out = [0u8; TOKEN_LEN / 2];
    for (i, b) in out.iter_mut().enumerate() {
        *b = digit(t[2 * i])? << 4 | digit(t[2 * i + 1])?;
    }
    Some(out)
}

/// The token whose bytes are `bytes` (see [`to_bytes`]).
pub fn from_bytes(bytes: &[u8; TOKEN_LEN / 2]) -> String {
    hex(bytes)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Checks that `token` has the shape of an owner token; `field` names it in the error.
pub fn check_token(field: impl At, token: &str) -> Result<()> {
    if token.len() == TOKEN_LEN && token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(Error::invalid_at(
            field,
            format!(
                "is not an owner token (expected the 32 hex characters returned by a claim or acquire, got {} characters)",
                token.chars().count()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_and_well_formed() {
        let a = new_token();
        assert_eq!(from_bytes(&to_bytes(&a).unwrap()), a, "a token's bytes give it back");
        for not in ["", "ab", &a.to_uppercase(), &format!("{a}0"), &a.replacen(|_: char| true, "g", 1)] {
            assert_eq!(to_bytes(not), None, "{not:?}");
        }
        let b = new_token();
        assert_ne!(a, b);
        check_token("owner", &a).unwrap();
        assert!(check_token("owner", "ABC").is_err());
        assert!(check_token("owner", &a.to_uppercase()).is_err());
    }
}
