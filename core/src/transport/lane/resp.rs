//! Reading RESP replies out of a byte buffer, for the lanes that read their own sockets.
//!
//! [`frame_len`] finds where a whole reply ends (so a partial one waits for more bytes), and
//! [`parse`] turns a whole reply into the [`Value`] redis-rs's own parser would give. The replies
//! crosslock's scripts send (an integer, a null, a short string, an array of those) are read
//! here directly; anything else (an error, a map, a double, …) goes to
//! [`redis::parse_redis_value`]. redis-rs's parser is general and streaming, and costs several
//! microseconds per reply even for `:1` (a fresh decoder, its buffer, its error tracking): on an
//! event loop that reads a reply per call, that was a few percent of an acquire and release pair.

use redis::{RedisResult, Value};

/// Arrays nested deeper than this go to redis-rs, which refuses them as it always has.
const MAX_DEPTH: usize = 100;

/// The length of the whole RESP2/RESP3 reply at the start of `buf`, `None` while incomplete.
pub(crate) fn frame_len(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    let mut remaining: u64 = 1;
    while remaining > 0 {
        remaining -= 1;
        let kind = *buf.get(at)?;
        let line_end = at + line_len(&buf[at..])?;
        let line = &buf[at + 1..line_end];
        at = line_end + 2;
        match kind {
            b'$' | b'!' | b'=' => {
                let n = count(line)?;
                if n >= 0 {
                    // Checked: a corrupt length must never make a short frame.
                    at = at.checked_add(usize::try_from(n).ok()?)?.checked_add(2)?;
                    if buf.len() < at {
                        return None;
                    }
                }
            }
            b'*' | b'~' | b'>' => remaining = remaining.checked_add(count(line)?.max(0) as u64)?,
            b'%' => remaining = remaining.checked_add(2 * count(line)?.max(0) as u64)?,
            // Attributes come before the reply they describe.
            b'|' => remaining = remaining.checked_add(2 * count(line)?.max(0) as u64 + 1)?,
            _ => {}
        }
    }
    Some(at)
}

/// The reply `frame` (one whole reply, as [`frame_len`] measured it) as redis-rs gives it: a
/// top-level error is a [`Value::ServerError`], to be taken out with [`Value::extract_error`].
pub(crate) fn parse(frame: &[u8]) -> RedisResult<Value> {
    match read(frame) {
        Some(value) => Ok(value),
        None => redis::parse_redis_value(frame),
    }
}

/// `frame` read here, or `None` when it is left to redis-rs.
fn read(frame: &[u8]) -> Option<Value> {
    let mut at = 0;
    let value = value(frame, &mut at, 0)?;
    (at == frame.len()).then_some(value)
}

/// The value at `buf[*at..]`, moving `at` past it; `None` for anything left to redis-rs.
fn value(buf: &[u8], at: &mut usize, depth: usize) -> Option<Value> {
    let kind = *buf.get(*at)?;
    let line_end = *at + line_len(&buf[*at..])?;
    let line = &buf[*at + 1..line_end];
    *at = line_end + 2;
    Some(match kind {
        b':' => Value::Int(std::str::from_utf8(line).ok()?.trim().parse().ok()?),
        b'_' => Value::Nil,
        b'+' => match std::str::from_utf8(line).ok()? {
            "OK" => Value::Okay,
            text => Value::SimpleString(text.to_owned()),
        },
        b'#' => match line {
            b"t" => Value::Boolean(true),
            b"f" => Value::Boolean(false),
            _ => return None,
        },
        b'$' => {
            let n = count(line)?;
            if n < 0 {
                return Some(Value::Nil);
            }
            let end = at.checked_add(n as usize)?;
            if buf.get(end..end.checked_add(2)?)? != b"\r\n" {
                return None;
            }
            let bytes = buf[*at..end].to_vec();
            *at = end + 2;
            Value::BulkString(bytes)
        }
        b'*' => {
            let n = count(line)?;
            if n < 0 {
                return Some(Value::Nil);
            }
            if depth + 1 > MAX_DEPTH {
                return None;
            }
            // Each element takes at least 3 bytes: a claimed length beyond that is not trusted
            // with an allocation.
            let mut items = Vec::with_capacity((n as usize).min((buf.len() - *at) / 3));
            for _ in 0..n {
                items.push(value(buf, at, depth + 1)?);
            }
            Value::Array(items)
        }
        _ => return None,
    })
}

/// Where the first `\r\n` of `buf` starts.
fn line_len(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    loop {
        let cr = from + buf[from..].iter().position(|&b| b == b'\r')?;
        if buf.get(cr + 1) == Some(&b'\n') {
            return Some(cr);
        }
        from = cr + 1;
    }
}

/// A length line (`$3`, `*2`): `None` when it is not a number.
fn count(line: &[u8]) -> Option<i64> {
    std::str::from_utf8(line).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{frame_len, parse, read};

    #[test]
    fn frame_len_finds_whole_replies_only() {
        assert_eq!(frame_len(b":1\r\n"), Some(4));
        assert_eq!(frame_len(b":1\r"), None);
        assert_eq!(frame_len(b"$3\r\nabc\r\n+OK\r\n"), Some(9));
        assert_eq!(frame_len(b"$3\r\nab"), None);
        assert_eq!(frame_len(b"$-1\r\n"), Some(5));
        assert_eq!(frame_len(b"_\r\n"), Some(3));
        assert_eq!(frame_len(b"*2\r\n:1\r\n$1\r\nx\r\n"), Some(15));
        assert_eq!(frame_len(b"*2\r\n:1\r\n"), None);
        assert_eq!(frame_len(b"%1\r\n+a\r\n:1\r\n"), Some(12));
        assert_eq!(frame_len(b"*0\r\n"), Some(4));
        assert_eq!(frame_len(b"-ERR x\r\n"), Some(8));
        assert_eq!(frame_len(b"+a\rb\r\n"), Some(6));
        // Counts no buffer can hold are an incomplete frame, not an arithmetic overflow.
        assert_eq!(frame_len(b"$9223372036854775807\r\nab\r\n"), None);
        assert_eq!(
            frame_len(b"%9223372036854775807\r\n%9223372036854775807\r\n"),
            None
        );
    }

    /// Every reply reads as redis-rs reads it, errors included: the replies crosslock's scripts
    /// send, and the ones left to redis-rs.
    #[test]
    fn replies_read_as_redis_rs_reads_them() {
        let frames: &[&[u8]] = &[
            b":1\r\n",
            b":-42\r\n",
            b":0\r\n",
            b": 7 \r\n",
            b":9223372036854775807\r\n",
            b":9223372036854775808\r\n",
            b":x\r\n",
            b"_\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"+OK\r\n",
            b"+QUEUED\r\n",
            b"+\r\n",
            b"+a\rb\r\n",
            b"+\xff\xfe\r\n",
            b"#t\r\n",
            b"#f\r\n",
            b"#x\r\n",
            b"$0\r\n\r\n",
            b"$3\r\nabc\r\n",
            b"$4\r\na\r\nb\r\n",
            b"$3\r\n\xff\x00\x01\r\n",
            b"$2\r\nabc\r\n",
            b"*0\r\n",
            b"*3\r\n:1\r\n$-1\r\n+OK\r\n",
            b"*2\r\n*2\r\n:1\r\n:2\r\n$1\r\nx\r\n",
            b"*2\r\n:1\r\n-ERR inside\r\n",
            b"*1\r\n_\r\n",
            b"-ERR wrong number of arguments\r\n",
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            b"!21\r\nSYNTAX invalid syntax\r\n",
            b",3.14\r\n",
            b"(3492890328409238509324850943850943825024385\r\n",
            b"=15\r\ntxt:Some string\r\n",
            b"%2\r\n+a\r\n:1\r\n+b\r\n_\r\n",
            b"~2\r\n:1\r\n:2\r\n",
            b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n",
            b"|1\r\n+ttl\r\n:3\r\n:5\r\n",
            b"*1\r\n%1\r\n+k\r\n,1.5\r\n",
        ];
        for frame in frames {
            let ours = parse(frame);
            let theirs = redis::parse_redis_value(frame);
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{:?}", String::from_utf8_lossy(frame)),
                (Err(a), Err(b)) => assert_eq!(
                    (a.kind(), a.to_string()),
                    (b.kind(), b.to_string()),
                    "{:?}",
                    String::from_utf8_lossy(frame)
                ),
                _ => panic!(
                    "{:?}: {ours:?} against {theirs:?}",
                    String::from_utf8_lossy(frame)
                ),
            }
        }
    }

    /// What crosslock's scripts answer is read here, not left to redis-rs (the point of it all).
    #[test]
    fn script_replies_take_the_short_way() {
        for frame in [
            &b":1\r\n"[..],
            b"_\r\n",
            b"$-1\r\n",
            b"+OK\r\n",
            b"$36\r\n0f1e2d3c-0000-4000-8000-000000000000\r\n",
            b"*2\r\n:1\r\n$5\r\nowner\r\n",
            b"#t\r\n",
        ] {
            assert!(
                read(frame).is_some(),
                "{:?}",
                String::from_utf8_lossy(frame)
            );
        }
        assert!(read(b"-ERR x\r\n").is_none());
        assert!(read(b":1\r\n:2\r\n").is_none(), "one reply per frame");
    }

    #[test]
    fn deep_nesting_is_refused_as_redis_rs_refuses_it() {
        let mut deep = b"*1\r\n".repeat(150);
        deep.extend_from_slice(b":1\r\n");
        assert!(parse(&deep).is_err());
        assert!(redis::parse_redis_value(&deep).is_err());
        let mut shallow = b"*1\r\n".repeat(20);
        shallow.extend_from_slice(b":1\r\n");
        assert_eq!(
            parse(&shallow).ok(),
            redis::parse_redis_value(&shallow).ok()
        );
    }
}
