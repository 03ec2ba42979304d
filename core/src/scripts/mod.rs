//! The Lua scripts, one file per operation, loaded once per process.
//!
//! Each script is a [`redis::Script`]: it is sent as `EVALSHA` and loaded on `NOSCRIPT`, so a
//! server restart or `SCRIPT FLUSH` costs one extra round trip and nothing else.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!($file)));
    };
}

script!(LOCK_ACQUIRE, "lock_acquire.lua");
script!(LOCK_RELEASE, "lock_release.lua");
script!(LOCK_RELEASE_ALL, "lock_release_all.lua");
script!(LOCK_FORCE_UNLOCK, "lock_force_unlock.lua");
script!(LOCK_INFO, "lock_info.lua");
script!(LOCK_RENEW, "lock_renew.lua");
