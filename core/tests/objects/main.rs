//! One test binary for the objects: what only each object type does, a module per type
//! (`<stem>.rs`, named as in `src/objects/`), and faults at the core (`faults.rs`); what every
//! lock of the family shares is `../lock_family.rs`, a binary of its own (see there). One binary
//! links once: cargo links each file of `tests/` as a binary of its own. Run one type's tests
//! with `cargo test -p crosslock --test objects fair_lock::`.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod count_down_latch;
mod fair_lock;
mod faults;
mod fenced_lock;
mod group_lock;
mod lock;
mod multi_lock;
mod permit_expirable_semaphore;
mod read_write_lock;
mod semaphore;
mod spin_lock;
mod telemetry;
