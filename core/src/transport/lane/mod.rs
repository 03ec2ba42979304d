//! Lanes: round trips a caller makes itself, on its own thread ([`blocking`], for sync callers)
//! or on its event loop ([`event_loop`], one lane each in [`loop_lane`], an application
//! runtime's loop in [`app_runtime`]), over [`socket`]s, with a small RESP reader for their
//! replies ([`resp`]). Whether a call may take a lane, and whose, is the ambient state in
//! [`ambient`]. The promises lanes keep are in [`blocking`]'s module doc.

pub(crate) mod ambient;
mod app_runtime;
pub(crate) mod blocking;
pub(crate) mod event_loop;
mod loop_lane;
pub(crate) mod resp;
mod socket;

pub(crate) use blocking::*;
pub(crate) use socket::Socket;
