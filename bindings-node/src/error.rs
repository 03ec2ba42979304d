//! The one place a crosslock error becomes a JavaScript error.
//!
//! napi-rs cannot give a promise rejection a custom `code` (a rejected deferred always carries a
//! napi `Status`; napi-rs issue #1632), so every error this module throws or rejects with is
//! encoded the same way, for sync and async calls alike:
//!
//! ```text
//! error.message = "CROSSLOCK_ERROR:" + JSON { code, message, lockName, holder, cause, waited }
//! ```
//!
//! `code` is [`crosslock::ErrorKind::code`] (`"NOT_HELD"`, `"TIMEOUT"`, …); `lockName`, `holder`,
//! `cause` (the Redis error's text) and `waited` (milliseconds) are `null` when unknown.
//! `lib/errors.ts` (`fromNative`) is the one function that decodes it into a `CrosslockError`
//! subclass; every native call in the TypeScript layer goes through it.

use std::fmt::Write as _;

/// What starts the message of every error this module produces.
pub(crate) const PREFIX: &str = "CROSSLOCK_ERROR:";

/// Converts a core error into the encoded napi error (see the module docs).
pub(crate) fn to_napi(err: &crosslock::Error) -> napi::Error {
    let cause = std::error::Error::source(err).map(|s| s.to_string());
    encode(
        err.kind().code(),
        err.message(),
        err.lock_name(),
        err.holder(),
        cause.as_deref(),
        err.waited().map(|w| w.as_secs_f64() * 1000.0),
    )
}

/// An `INVALID_ARGUMENT` error for an argument the binding itself rejects (an owner that is not a
/// safe integer).
pub(crate) fn invalid_argument(message: impl AsRef<str>) -> napi::Error {
    encode("INVALID_ARGUMENT", message.as_ref(), None, None, None, None)
}

/// A `REDIS` error for what should never happen (a panicked task), so no promise is left pending.
pub(crate) fn internal(message: impl AsRef<str>) -> napi::Error {
    encode("REDIS", message.as_ref(), None, None, None, None)
}

fn encode(
    code: &str,
    message: &str,
    lock_name: Option<&str>,
    holder: Option<&str>,
    cause: Option<&str>,
    waited_ms: Option<f64>,
) -> napi::Error {
    let mut out = String::with_capacity(64 + message.len());
    out.push_str(PREFIX);
    out.push_str("{\"code\":");
    json_str(&mut out, Some(code));
    out.push_str(",\"message\":");
    json_str(&mut out, Some(message));
    out.push_str(",\"lockName\":");
    json_str(&mut out, lock_name);
    out.push_str(",\"holder\":");
    json_str(&mut out, holder);
    out.push_str(",\"cause\":");
    json_str(&mut out, cause);
    out.push_str(",\"waited\":");
    match waited_ms {
        Some(ms) if ms.is_finite() => {
            let _ = write!(out, "{ms}");
        }
        _ => out.push_str("null"),
    }
    out.push('}');
    napi::Error::new(napi::Status::GenericFailure, out)
}

/// Appends `value` as a JSON string (or `null`).
fn json_str(out: &mut String, value: Option<&str>) {
    let Some(value) = value else {
        out.push_str("null");
        return;
    };
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
