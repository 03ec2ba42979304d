//! Lanes: round trips a caller makes itself, on its own thread ([`blocking`], for sync callers)
//! or on its event loop ([`event_loop`]), with a small RESP reader for their replies ([`resp`]).
//! The promises they keep are in [`blocking`]'s module doc.

pub(crate) mod blocking;
pub(crate) mod event_loop;
pub(crate) mod resp;

pub(crate) use blocking::*;
