//! Reading RESP2 replies out of the bytes received so far.
//!
//! The connection reads whatever the socket has and parses complete replies off the front. The
//! server is not trusted with lengths: a reply that declares more than [`MAX_REPLY`] bytes or
//! elements, or any other bytes that are not RESP2, are an error (the connection is dropped and
//! its calls fail), never a panic, an overflow or an allocation of what a length says. Values
//! are redis-rs's own, equal to what its parser makes of the same bytes (tested against it).

use redis::Value;

/// The largest reply accepted, in bytes (declared lengths included). The scripts sent over this
/// connection answer with a few short fields; Redis itself caps a bulk string at 512 MB.
pub(crate) const MAX_REPLY: usize = 64 << 20;
/// Nesting deeper than this is refused (the scripts reply with flat arrays).
const MAX_DEPTH: u32 = 64;
/// The longest integer line (`:`, `$`, `*`): an i64 with sign and spaces to spare.
const MAX_INT_LINE: usize = 32;
/// The longest status or error line (Redis's are short; an error of a script names it and a line).
const MAX_TEXT_LINE: usize = 1 << 20;

/// The outcome of reading the front of a buffer.
#[derive(Debug, PartialEq)]
pub(crate) enum Parsed {
    /// A complete reply and the number of bytes it took.
    Reply(Value, usize),
    /// Incomplete: nothing can be read before the buffer holds at least this many bytes.
    Need(usize),
}

/// Bytes that are not a RESP2 reply (or one over the limits).
#[derive(Debug, PartialEq)]
pub(crate) struct Invalid(pub &'static str);

/// Parses the reply at the start of `b`.
pub(crate) fn parse(b: &[u8]) -> Result<Parsed, Invalid> {
    parse_at(b, 0, 0)
}

/// The line starting at `at` (without its CRLF) and the index after it; Err(need) if incomplete.
fn line(b: &[u8], at: usize, max: usize) -> Result<Result<(&[u8], usize), usize>, Invalid> {
    let rest = b.get(at..).unwrap_or(&[]);
    match rest.windows(2).position(|w| w == b"\r\n") {
        Some(i) if i <= max => Ok(Ok((&rest[..i], at + i + 2))),
        Some(_) => Err(Invalid("a reply line is too long")),
        None if rest.len() > max + 1 => Err(Invalid("a reply line is too long")),
        None => Ok(Err(at + rest.len() + 1)),
    }
}

/// An integer as redis-rs reads one (surrounding whitespace allowed).
fn int_of(l: &[u8]) -> Result<i64, Invalid> {
    std::str::from_utf8(l)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or(Invalid("a reply length or integer is not a number"))
}

fn text_of(l: &[u8]) -> Result<&str, Invalid> {
    std::str::from_utf8(l).map_err(|_| Invalid("a reply line is not UTF-8"))
}

macro_rules! need {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(n) => return Ok(Parsed::Need(n)),
        }
    };
}

fn parse_at(b: &[u8], at: usize, depth: u32) -> Result<Parsed, Invalid> {
    if depth > MAX_DEPTH {
        return Err(Invalid("a reply is nested too deeply"));
    }
    let Some(&kind) = b.get(at) else { return Ok(Parsed::Need(at + 1)) };
    let int_line = matches!(kind, b':' | b'$' | b'*');
    let (l, next) = need!(line(b, at + 1, if int_line { MAX_INT_LINE } else { MAX_TEXT_LINE })?);
    Ok(match kind {
        b':' => Parsed::Reply(Value::Int(int_of(l)?), next),
        b'+' => match text_of(l)? {
            "OK" => Parsed::Reply(Value::Okay, next),
            s => Parsed::Reply(Value::SimpleString(s.to_string()), next),
        },
        // Error replies are rare: redis-rs's own parser makes them exactly as it reports them.
        b'-' => {
            text_of(l)?;
            let v =
                redis::parse_redis_value(&b[at..next]).map_err(|_| Invalid("an error reply is malformed"))?;
            Parsed::Reply(v, next)
        }
        b'$' => {
            let n = int_of(l)?;
            if n < 0 {
                return Ok(Parsed::Reply(Value::Nil, next));
            }
            let n = usize::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_REPLY)
                .ok_or(Invalid("a bulk string is too long"))?;
            // `next` is at most MAX_REPLY past the start (every line and value before it is).
            let end = next + n;
            if end > MAX_REPLY {
                return Err(Invalid("a reply is too long"));
            }
            if b.len() < end + 2 {
                return Ok(Parsed::Need(end + 2));
            }
            if &b[end..end + 2] != b"\r\n" {
                return Err(Invalid("a bulk string does not end with CRLF"));
            }
            Parsed::Reply(Value::BulkString(b[next..end].to_vec()), end + 2)
        }
        b'*' => {
            let n = int_of(l)?;
            if n < 0 {
                return Ok(Parsed::Reply(Value::Nil, next));
            }
            // Each element takes at least 3 bytes (`+\r\n`).
            let n = usize::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_REPLY / 3)
                .ok_or(Invalid("an array is too long"))?;
            // Room for what has arrived, not for what the length says.
            let mut items = Vec::with_capacity(n.min((b.len() - next) / 3));
            let mut at = next;
            for _ in 0..n {
                match parse_at(b, at, depth + 1)? {
                    Parsed::Reply(v, after) => {
                        items.push(v);
                        at = after;
                    }
                    Parsed::Need(k) => return Ok(Parsed::Need(k)),
                }
            }
            Parsed::Reply(Value::Array(items), at)
        }
        _ => return Err(Invalid("not a RESP2 reply")),
    })
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn reply(b: &[u8]) -> Value {
        match parse(b) {
            Ok(Parsed::Reply(v, n)) if n == b.len() => v,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn parses_resp2() {
        assert_eq!(parse(b":12\r\n"), Ok(Parsed::Reply(Value::Int(12), 5)));
        assert_eq!(parse(b":12\r"), Ok(Parsed::Need(5)));
        assert_eq!(parse(b"$3\r\nabc\r\n+OK\r\n"), Ok(Parsed::Reply(Value::BulkString(b"abc".to_vec()), 9)));
        assert_eq!(parse(b"$3\r\nab"), Ok(Parsed::Need(9)));
        assert_eq!(reply(b"$-1\r\n"), Value::Nil);
        assert_eq!(reply(b"+OK\r\n"), Value::Okay);
        assert_eq!(
            reply(b"*2\r\n$5\r\n1:a:b\r\n:-3\r\n"),
            Value::Array(vec![Value::BulkString(b"1:a:b".to_vec()), Value::Int(-3)])
        );
        assert_eq!(parse(b"*2\r\n$5\r\n1:a:b\r\n"), Ok(Parsed::Need(16)));
        let err = reply(b"-NOSCRIPT No matching script\r\n").extract_error().unwrap_err();
        assert_eq!(err.kind(), redis::ErrorKind::Server(redis::ServerErrorKind::NoScript));
        assert!(parse(b"?x\r\n").is_err());
    }

    #[test]
    fn hostile_lengths_are_errors() {
        for b in [
            &b"$9223372036854775807\r\n"[..],
            b"$18446744073709551615\r\n",
            b"$67108865\r\n",
            b"*9223372036854775807\r\n",
            b"*22369622\r\n",
            b"*1\r\n$67108860\r\n",
            b":99999999999999999999\r\n",
            b"$-\r\n",
        ] {
            assert!(parse(b).is_err(), "{:?}", String::from_utf8_lossy(b));
        }
        // A length line that never ends is refused once it is longer than any length.
        assert!(parse(&[b'$'; 40]).is_err());
        let mut long = vec![b'+'; MAX_TEXT_LINE + 3];
        assert!(parse(&long).is_err());
        long.truncate(MAX_TEXT_LINE);
        assert_eq!(parse(&long), Ok(Parsed::Need(MAX_TEXT_LINE + 1)));
        assert_eq!(parse(b"$1234"), Ok(Parsed::Need(6)));
        let mut deep = b"*1\r\n".repeat(100);
        deep.extend_from_slice(b":1\r\n");
        assert!(parse(&deep).is_err());
        // A large array declared, little sent: no allocation of the declared size.
        assert_eq!(parse(b"*20000000\r\n:1\r\n"), Ok(Parsed::Need(16)));
    }

    // ---------------------------------------------------------------------------------------------
    // Differential test against redis-rs's parser, on seeded random inputs.

    fn gen_value(rng: &mut StdRng, depth: u32) -> Value {
        match rng.random_range(0..if depth < 4 { 7 } else { 5 }) {
            0 => Value::Int(match rng.random_range(0..4) {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => rng.random_range(-1000..1000),
            }),
            1 => Value::BulkString(gen_bytes(rng)),
            2 => Value::Nil,
            3 => Value::Okay,
            4 => Value::SimpleString(
                (0..rng.random_range(0..12)).map(|_| rng.random_range(b' '..=b'~') as char).collect(),
            ),
            _ => Value::Array((0..rng.random_range(0..6)).map(|_| gen_value(rng, depth + 1)).collect()),
        }
    }

    fn gen_bytes(rng: &mut StdRng) -> Vec<u8> {
        let pool: &[u8] = b"ab:\r\n$*-+0123456789\xff\x00";
        (0..rng.random_range(0..20)).map(|_| pool[rng.random_range(0..pool.len())]).collect()
    }

    fn encode(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
            Value::BulkString(b) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Value::Nil => out.extend_from_slice(b"$-1\r\n"),
            Value::Okay => out.extend_from_slice(b"+OK\r\n"),
            Value::SimpleString(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
            Value::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for i in items {
                    encode(i, out);
                }
            }
            _ => unreachable!("not generated"),
        }
    }

    /// Damages a valid reply: a byte changed, inserted or removed, a length made hostile.
    fn mutate(rng: &mut StdRng, b: &mut Vec<u8>) {
        let hostile: &[&[u8]] = &[
            b"9223372036854775807",
            b"-9223372036854775808",
            b"18446744073709551616",
            b"67108864",
            b"4294967296",
            b"-2",
            b" 3",
            b"3 ",
            b"",
            b"+1",
        ];
        for _ in 0..rng.random_range(1..3) {
            let at = rng.random_range(0..=b.len());
            match rng.random_range(0..4) {
                0 if at < b.len() => {
                    let pool = b"$*:+-\r\n0123456789x\xc3";
                    b[at] = pool[rng.random_range(0..pool.len())];
                }
                1 => {
                    let pool = b"$*:+-\r\n09";
                    b.insert(at, pool[rng.random_range(0..pool.len())]);
                }
                2 if at < b.len() => {
                    b.remove(at);
                }
                _ => {
                    // Replace the number after a type byte with a hostile one.
                    if let Some(p) = b.iter().position(|c| matches!(c, b'$' | b'*' | b':')) {
                        let end = b[p..].windows(2).position(|w| w == b"\r\n").map_or(b.len(), |e| p + e);
                        let h = hostile[rng.random_range(0..hostile.len())];
                        b.splice(p + 1..end, h.iter().copied());
                    }
                }
            }
        }
    }

    /// Ours and redis-rs's agree on `b`: the same value (of the same bytes) or both refuse it.
    /// Returns which way ours went (0 a reply, 1 needs more, 2 refused).
    fn agree(b: &[u8]) -> usize {
        let theirs = redis::parse_redis_value(b);
        let ours = parse(b);
        let way = match &ours {
            Ok(Parsed::Reply(..)) => 0,
            Ok(Parsed::Need(_)) => 1,
            Err(_) => 2,
        };
        match ours {
            Ok(Parsed::Reply(v, n)) => {
                assert!(n <= b.len());
                let exact = redis::parse_redis_value(&b[..n]);
                assert_eq!(exact.as_ref().ok(), Some(&v), "{:?}", String::from_utf8_lossy(b));
                assert_eq!(theirs.as_ref().ok(), Some(&v), "{:?}", String::from_utf8_lossy(b));
            }
            Ok(Parsed::Need(k)) => {
                assert!(k > b.len(), "{:?}: need {k}", String::from_utf8_lossy(b));
                assert!(theirs.is_err(), "{:?}: redis-rs read {theirs:?}", String::from_utf8_lossy(b));
            }
            Err(_) => {
                // redis-rs takes any RESP3 type and error replies that are not UTF-8 apart;
                // of RESP2 it must refuse what ours refuses.
                if matches!(b.first(), Some(b'$' | b'*' | b':' | b'+')) && b.is_ascii() {
                    assert!(theirs.is_err(), "{:?}: redis-rs read {theirs:?}", String::from_utf8_lossy(b));
                }
            }
        }
        way
    }

    fn cases() -> usize {
        std::env::var("FLOWGUARD_RESP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
    }

    #[test]
    fn agrees_with_redis_rs_on_valid_replies_and_their_prefixes() {
        let mut rng = StdRng::seed_from_u64(0x5eed_0001);
        for _ in 0..cases() {
            let v = gen_value(&mut rng, 0);
            let mut b = Vec::new();
            encode(&v, &mut b);
            assert_eq!(parse(&b), Ok(Parsed::Reply(v.clone(), b.len())));
            assert_eq!(redis::parse_redis_value(&b).ok(), Some(v));
            // Every truncation needs more, and never more than the whole reply.
            for cut in 0..b.len() {
                match parse(&b[..cut]) {
                    Ok(Parsed::Need(k)) => assert!(k > cut && k <= b.len(), "{b:?} cut at {cut}: need {k}"),
                    other => panic!("{b:?} cut at {cut}: {other:?}"),
                }
            }
            // Followed by more bytes, it is still the same reply.
            b.extend_from_slice(b"+OK\r\n");
            agree(&b);
        }
    }

    #[test]
    fn agrees_with_redis_rs_on_damaged_replies() {
        let mut rng = StdRng::seed_from_u64(0x5eed_0002);
        let mut ways = [0usize; 3];
        for _ in 0..cases() * 4 {
            let v = gen_value(&mut rng, 0);
            let mut b = Vec::new();
            encode(&v, &mut b);
            mutate(&mut rng, &mut b);
            ways[agree(&b)] += 1;
            let cut = rng.random_range(0..=b.len());
            ways[agree(&b[..cut])] += 1;
        }
        // The inputs reach every outcome, often.
        assert!(ways.iter().all(|n| *n > cases() / 10), "{ways:?}");
    }
}
