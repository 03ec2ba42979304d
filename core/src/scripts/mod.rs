//! The Lua scripts, one file per object operation in a folder per object (the same stems as
//! `objects/`), each prefixed with `prelude.lua` (argument and type checks shared by all) and
//! loaded once per process.
//!
//! Each script is a [`Lua`]: the first time a connection runs it, it is sent whole (`EVAL`, which
//! also caches it in the server); after that as `EVALSHA`, loaded again on `NOSCRIPT`, so a server
//! restart or `SCRIPT FLUSH` costs one extra round trip and nothing else. Sending it whole first
//! matters when nobody waits for the answer: a clean-up whose caller stopped waiting (a response
//! timeout while Redis is paused) would otherwise meet `NOSCRIPT` with nobody left to retry. Every script
//! checks its arguments and the type of what it finds before it writes anything, so a bad
//! argument or a name collision never leaves Redis half-changed. The layout they implement is
//! described in `docs/protocol.md`.
//!
//! Two marks on top: `script!(synced …)` marks a script that takes something (followed by `WAIT`
//! under `ClientOptions::wait_for_replicas`), and `node_script!` builds the per-cluster-node
//! variant of a renewal script.

use std::sync::LazyLock;

use redis::Script;

/// A script: its text (sent whole the first time a connection runs it) and its SHA1.
pub(crate) struct Lua {
    pub(crate) script: Script,
    pub(crate) code: &'static str,
    /// A script that takes a lock, a permit or a hold: with
    /// [`crate::ClientOptions::wait_for_replicas`], it is followed by `WAIT`.
    pub(crate) synced: bool,
}

impl Lua {
    fn new(code: &'static str) -> Self {
        Lua {
            script: Script::new(code),
            code,
            synced: false,
        }
    }

    /// The script's SHA1, as `EVALSHA` names it.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }
}

macro_rules! script {
    (synced $name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Lua> = LazyLock::new(|| Lua {
            synced: true,
            ..Lua::new(concat!(
                include_str!("prelude.lua"),
                "\n",
                include_str!($file)
            ))
        });
    };
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Lua> = LazyLock::new(|| {
            Lua::new(concat!(
                include_str!("prelude.lua"),
                "\n",
                include_str!($file)
            ))
        });
    };
}

/// The variant of a renewal script run once per cluster node for keys of many slots (Redis ≥ 7):
/// the keys travel as arguments (declared keys must share one slot), as `ARGV[1]` = their count,
/// then the keys, then the script's own arguments; the header gives the body the `KEYS` and `ARGV`
/// it expects. The script's flag lets it touch keys of any slot the node serves; a key the node
/// does not serve is refused by Redis, which the script reports as -1 for that key.
macro_rules! node_script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Lua> = LazyLock::new(|| {
            Lua::new(concat!(
                "#!lua flags=allow-cross-slot-keys\n",
                include_str!("node_args.lua"),
                include_str!("prelude.lua"),
                "\n",
                include_str!($file)
            ))
        });
    };
}

// Lock (RLock); the spin, fenced and non-reentrant locks share its hash and release.
script!(synced LOCK_ACQUIRE, "lock/acquire.lua");
script!(LOCK_RELEASE, "lock/release.lua");
script!(LOCK_FORCE_UNLOCK, "lock/force_unlock.lua");
script!(LOCK_INFO, "lock/info.lua");

// FencedLock
script!(synced FENCED_ACQUIRE, "fenced_lock/acquire.lua");
script!(FENCED_SETTLE, "fenced_lock/settle.lua");
script!(FENCED_TOKEN, "fenced_lock/token.lua");

// NonReentrantLock
script!(synced NON_REENTRANT_ACQUIRE, "non_reentrant_lock/acquire.lua");

// FairLock
script!(synced FAIR_ACQUIRE, "fair_lock/acquire.lua");
script!(FAIR_GIVE_UP, "fair_lock/give_up.lua");
script!(FAIR_RELEASE, "fair_lock/release.lua");
script!(FAIR_FORCE_UNLOCK, "fair_lock/force_unlock.lua");

// ReadWriteLock
script!(synced READ_ACQUIRE, "read_write_lock/read_acquire.lua");
script!(READ_RELEASE, "read_write_lock/read_release.lua");
script!(synced WRITE_ACQUIRE, "read_write_lock/write_acquire.lua");
script!(WRITE_RELEASE, "read_write_lock/write_release.lua");
script!(RW_FORCE_UNLOCK, "read_write_lock/force_unlock.lua");
script!(RW_INFO, "read_write_lock/info.lua");

// Renewal (the watchdog)
script!(RENEW_HASH, "renewal/hash.lua");
script!(RENEW_READ, "renewal/read.lua");
node_script!(RENEW_HASH_NODE, "renewal/hash.lua");
node_script!(RENEW_READ_NODE, "renewal/read.lua");

// Semaphore (and the permit-expirable semaphore's release of counted permits)
script!(synced SEMAPHORE_ACQUIRE, "semaphore/acquire.lua");
script!(SEMAPHORE_RELEASE, "semaphore/release.lua");
script!(SEMAPHORE_TRY_SET, "semaphore/try_set.lua");
script!(SEMAPHORE_ADD, "semaphore/add.lua");
script!(SEMAPHORE_DRAIN, "semaphore/drain.lua");
script!(SEMAPHORE_AVAILABLE, "semaphore/available.lua");
script!(COUNTER_DELETE, "semaphore/delete.lua");

// CountDownLatch
script!(LATCH_TRY_SET, "count_down_latch/try_set.lua");
script!(LATCH_COUNT_DOWN, "count_down_latch/count_down.lua");
script!(LATCH_COUNT, "count_down_latch/count.lua");
script!(LATCH_DELETE, "count_down_latch/delete.lua");

// PermitExpirableSemaphore (shares the counter scripts of Semaphore)
script!(synced PES_ACQUIRE, "permit_expirable_semaphore/acquire.lua");
script!(PES_RELEASE, "permit_expirable_semaphore/release.lua");
script!(
    PES_UPDATE_LEASE,
    "permit_expirable_semaphore/update_lease.lua"
);
script!(PES_INFO, "permit_expirable_semaphore/info.lua");
script!(RENEW_PERMIT, "renewal/permit.lua");
node_script!(RENEW_PERMIT_NODE, "renewal/permit.lua");

// The inspector (read-only)
script!(INSPECT, "inspect/inspect.lua");
