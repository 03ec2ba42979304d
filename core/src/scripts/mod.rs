//! The Lua scripts, one file per object operation in a folder per object (the same stems as
//! `objects/`), each prefixed with the functions of `prelude.lua` (argument and type checks shared
//! by all) that it calls, and loaded once per process. Only those: Redis runs a script's whole text
//! on every call, and each `local function` it defines is a closure made per call (the whole
//! prelude cost a lock's acquire and release ~1 µs of server time per call, 5-10% of their time).
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
//! Two marks on top: `script!(synced …)` makes a script that takes something a [`Synced`] (run
//! only by `Conn::eval_synced`, which follows it by `WAIT` under
//! `ClientOptions::wait_for_replicas`), and `node_script!` builds the per-cluster-node
//! variant of a renewal script. Every body is wrapped (see [`PROTECTED_BODY`]) so that an error a
//! check raises reaches the caller as its error reply on Redis 6.2 too; elsewhere the wrapper
//! costs one `pcall` per call.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use redis::Script;

/// A script: its text (sent whole the first time a connection runs it) and its SHA1.
pub(crate) struct Lua {
    pub(crate) script: Script,
    pub(crate) code: String,
    /// Its file under `scripts/`, without `.lua` (`lock/acquire`): what a span calls it.
    pub(crate) name: &'static str,
    /// The script's number in this process (its bit in a [`ScriptSet`]).
    id: usize,
}

impl Lua {
    fn new(name: &'static str, code: String) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Lua {
            script: Script::new(&code),
            code,
            name: name.strip_suffix(".lua").unwrap_or(name),
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The script's SHA1, as `EVALSHA` names it.
    pub(crate) fn hash(&self) -> &str {
        self.script.get_hash()
    }
}

/// A script that takes a lock, a permit or a hold. Only `Conn::eval_synced` runs one: with
/// [`crate::ClientOptions::wait_for_replicas`], it follows the script by `WAIT` and notes how many
/// replicas acknowledged it in the attempt's `ReplicaAcks`. A type of its own, so that no
/// acquisition can be sent through `Conn::eval`, past the `WAIT` and the count.
pub(crate) struct Synced(Lua);

impl Synced {
    /// The script itself, for the transport that runs it.
    pub(crate) fn lua(&self) -> &Lua {
        &self.0
    }
}

/// Words of a [`ScriptSet`]: room for 128 scripts (a test checks that every script has one).
const SCRIPT_WORDS: usize = 2;

/// A set of scripts, one bit each: what a connection has loaded, and what it has run. Asked on
/// every call, so an atomic load, where a set of SHA1 strings took a lock, a hash of 40 bytes
/// and a comparison. A script past its room (none today) is never in the set: it is sent whole
/// every time and never over an event loop's lane, slower but still correct.
#[derive(Default)]
pub(crate) struct ScriptSet([AtomicU64; SCRIPT_WORDS]);

impl ScriptSet {
    /// The word and mask of `script`'s bit, if it has room.
    fn bit(&self, script: &Lua) -> Option<(&AtomicU64, u64)> {
        let word = self.0.get(script.id / 64)?;
        Some((word, 1 << (script.id % 64)))
    }

    pub(crate) fn contains(&self, script: &Lua) -> bool {
        self.bit(script)
            .is_some_and(|(word, mask)| word.load(Ordering::Acquire) & mask != 0)
    }

    /// Adds `script`; whether it was not in the set before (always true for one without room).
    pub(crate) fn insert(&self, script: &Lua) -> bool {
        self.bit(script)
            .is_none_or(|(word, mask)| word.fetch_or(mask, Ordering::AcqRel) & mask == 0)
    }

    pub(crate) fn clear(&self) {
        for word in &self.0 {
            word.store(0, Ordering::Release);
        }
    }
}

/// The prelude's functions, in its order: each one's name and text (the comment above it
/// included).
fn prelude_functions() -> Vec<(&'static str, &'static str)> {
    const PRELUDE: &str = include_str!("prelude.lua");
    // A function starts where the comment lines just above its `local function` line start.
    let mut starts = Vec::new();
    let mut comment_from = None;
    let mut at = 0;
    for line in PRELUDE.split_inclusive('\n') {
        if line.starts_with("--") {
            comment_from.get_or_insert(at);
        } else if let Some(rest) = line.strip_prefix("local function ") {
            let name = rest.split('(').next().unwrap_or_default().trim();
            starts.push((name, comment_from.unwrap_or(at)));
            comment_from = None;
        } else {
            comment_from = None;
        }
        at += line.len();
    }
    let ends = starts.iter().skip(1).map(|&(_, start)| start);
    starts
        .iter()
        .zip(ends.chain([PRELUDE.len()]))
        .map(|(&(name, start), end)| (name, &PRELUDE[start..end]))
        .collect()
}

/// Whether `code` names `word` (not as a part of a longer identifier).
fn names(code: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    code.match_indices(word)
        .any(|(at, _)| !code[..at].ends_with(ident) && !code[at + word.len()..].starts_with(ident))
}

/// How a script's body is run. Its checks raise their errors as tables (the prelude's
/// `error({ err = 'WRONGTYPE …' })`), which Redis 7 and Valkey turn into that error reply. Redis
/// 6.2's error handler cannot (it concatenates the table into a message and fails: "attempt to
/// concatenate local 'err' (a table value)"), and every error a check reports came back there as
/// a script failure. So the script asks the server which it is, by what its `pcall` hands back for
/// a raised table (Redis 7 wraps `pcall` and hands back the message; 6.2 the table itself), and
/// there runs the body in a protected call, an error table it raises returned as that error reply.
/// Elsewhere the body runs as it is.
const PROTECTED_BODY: (&str, &str) = (
    "local function crosslock_body()\n",
    "\nend\nif type(select(2, pcall(error, { err = '' }))) ~= 'table' then return crosslock_body() end\n\
     local ok, result = pcall(crosslock_body)\nif ok then return result end\n\
     if type(result) == 'table' and result.err then return { err = result.err } end\n\
     error(result, 0)\n",
);

/// `header`, the prelude functions `body` calls (directly or through one another, in the
/// prelude's order, so each is defined before its callers), then `body` (run as
/// [`PROTECTED_BODY`] says).
fn with_prelude(header: &str, body: &str) -> String {
    let functions = prelude_functions();
    let mut needed = vec![false; functions.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for (i, &(name, _)) in functions.iter().enumerate() {
            let called = !needed[i]
                && (names(body, name)
                    || functions
                        .iter()
                        .zip(&needed)
                        .any(|(&(other, text), &kept)| kept && other != name && names(text, name)));
            if called {
                needed[i] = true;
                changed = true;
            }
        }
    }
    let mut code = String::from(header);
    for (&(_, text), kept) in functions.iter().zip(needed) {
        if kept {
            code.push_str(text);
        }
    }
    code.push('\n');
    code.push_str(PROTECTED_BODY.0);
    code.push_str(body);
    code.push_str(PROTECTED_BODY.1);
    code
}

macro_rules! script {
    (synced $name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Synced> =
            LazyLock::new(|| Synced(Lua::new($file, with_prelude("", include_str!($file)))));
    };
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Lua> =
            LazyLock::new(|| Lua::new($file, with_prelude("", include_str!($file))));
    };
}

/// The mark that lets a script touch keys of many slots of one cluster node (Redis 7 and later;
/// Redis 6.2 cannot compile it).
macro_rules! cross_slot_mark {
    () => {
        "#!lua flags=allow-cross-slot-keys\n"
    };
}

/// A script that carries only the mark: a cluster's nodes are asked to run it when a client
/// connects, to know whether the watchdog can renew with one script per master.
pub(crate) const CROSS_SLOT_PROBE: &str = concat!(cross_slot_mark!(), "return 1");

/// Whether `message`, a server's error reply to a script with the cross-slot mark, says it cannot
/// run the mark (Redis before 7 does not compile it), rather than refusing the script for another
/// reason (a busy server, a missing permission), which says nothing of the mark.
pub(crate) fn refuses_cross_slot_mark(message: &str) -> bool {
    message.contains("compil") || message.contains("flag")
}

/// The variant of a renewal script run once per cluster node for keys of many slots (Redis ≥ 7):
/// the keys travel as arguments (declared keys must share one slot), as `ARGV[1]` = their count,
/// then the keys, then the script's own arguments; the header gives the body the `KEYS` and `ARGV`
/// it expects. The script's flag lets it touch keys of any slot the node serves; a key the node
/// does not serve is refused by Redis, which the script reports as -1 for that key.
macro_rules! node_script {
    ($name:ident, $file:literal) => {
        pub(crate) static $name: LazyLock<Lua> = LazyLock::new(|| {
            Lua::new(
                $file,
                with_prelude(
                    concat!(cross_slot_mark!(), include_str!("node_args.lua")),
                    include_str!($file),
                ),
            )
        });
    };
}

// Lock (RLock); the spin, fenced and non-reentrant locks share its hash and release.
script!(synced LOCK_ACQUIRE, "lock/acquire.lua");
script!(LOCK_RELEASE, "lock/release.lua");
script!(LOCK_FORCE_UNLOCK, "lock/force_unlock.lua");
script!(LOCK_INFO, "lock/info.lua");
script!(LOCK_EXTEND, "lock/extend.lua");

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
script!(READ_EXTEND, "read_write_lock/read_extend.lua");

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

// GroupLock (Redisson's getMultiLock(group, values))
script!(synced GROUP_ACQUIRE, "group_lock/acquire.lua");
script!(GROUP_RELEASE, "group_lock/release.lua");
script!(GROUP_EXTEND, "group_lock/extend.lua");
script!(GROUP_INFO, "group_lock/info.lua");
script!(GROUP_FORCE_UNLOCK, "group_lock/force_unlock.lua");
script!(RENEW_GROUP, "renewal/group.lua");
node_script!(RENEW_GROUP_NODE, "renewal/group.lua");

// The inspector (read-only)
script!(INSPECT, "inspect/inspect.lua");

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<(&'static str, &'static Lua)> {
        macro_rules! list {
            (synced: $($synced:ident)*; plain: $($name:ident)*) => {
                vec![
                    $((stringify!($synced), $synced.lua()),)*
                    $((stringify!($name), &*$name),)*
                ]
            };
        }
        list!(
            synced: LOCK_ACQUIRE FENCED_ACQUIRE NON_REENTRANT_ACQUIRE FAIR_ACQUIRE READ_ACQUIRE
            WRITE_ACQUIRE SEMAPHORE_ACQUIRE PES_ACQUIRE GROUP_ACQUIRE;
            plain: LOCK_RELEASE LOCK_FORCE_UNLOCK LOCK_INFO FENCED_SETTLE FENCED_TOKEN FAIR_GIVE_UP
            FAIR_RELEASE FAIR_FORCE_UNLOCK READ_RELEASE WRITE_RELEASE RW_FORCE_UNLOCK RW_INFO
            LOCK_EXTEND READ_EXTEND RENEW_HASH RENEW_READ RENEW_HASH_NODE RENEW_READ_NODE
            SEMAPHORE_RELEASE SEMAPHORE_TRY_SET SEMAPHORE_ADD SEMAPHORE_DRAIN SEMAPHORE_AVAILABLE
            COUNTER_DELETE LATCH_TRY_SET LATCH_COUNT_DOWN LATCH_COUNT LATCH_DELETE PES_RELEASE
            PES_UPDATE_LEASE PES_INFO RENEW_PERMIT RENEW_PERMIT_NODE INSPECT GROUP_RELEASE
            GROUP_EXTEND GROUP_INFO GROUP_FORCE_UNLOCK RENEW_GROUP RENEW_GROUP_NODE
        )
    }

    #[test]
    fn every_script_has_a_bit_of_its_own_in_a_script_set() {
        let scripts = all();
        let ids: std::collections::BTreeSet<usize> =
            scripts.iter().map(|(_, lua)| lua.id).collect();
        assert_eq!(ids.len(), scripts.len(), "two scripts share a number");
        assert!(
            ids.iter().all(|&id| id < SCRIPT_WORDS * 64),
            "more scripts than a ScriptSet has room for: raise SCRIPT_WORDS"
        );
        let set = ScriptSet::default();
        for (_, lua) in &scripts {
            assert!(!set.contains(lua));
            assert!(set.insert(lua));
            assert!(!set.insert(lua), "inserted twice");
        }
        assert!(scripts.iter().all(|(_, lua)| set.contains(lua)));
        set.clear();
        assert!(scripts.iter().all(|(_, lua)| !set.contains(lua)));
        // A script past the set's room is never in it: sent whole, never over a loop's lane.
        let extra = Lua {
            id: SCRIPT_WORDS * 64,
            ..Lua::new("test.lua", "return 1".into())
        };
        assert!(set.insert(&extra) && set.insert(&extra));
        assert!(!set.contains(&extra));
    }

    #[test]
    fn the_prelude_is_split_into_all_its_functions() {
        let functions = prelude_functions();
        let text: String = functions.iter().map(|&(_, text)| text).collect();
        let prelude = include_str!("prelude.lua");
        // Nothing but the file's own heading comment is left out.
        assert!(prelude.ends_with(&text));
        assert!(
            prelude[..prelude.len() - text.len()]
                .lines()
                .all(|line| line.is_empty() || line.starts_with("--"))
        );
        assert_eq!(
            functions.len(),
            prelude.matches("\nlocal function ").count()
        );
        for &(name, text) in &functions {
            assert!(
                text.contains(&format!("local function {name}(")),
                "{name}: {text}"
            );
        }
    }

    #[test]
    fn every_script_defines_each_prelude_function_it_names_and_no_other() {
        let functions = prelude_functions();
        for (script, lua) in all() {
            for &(name, _) in &functions {
                if names(&lua.code, name) {
                    assert!(
                        lua.code.contains(&format!("local function {name}(")),
                        "{script} names {name} without defining it"
                    );
                }
            }
        }
        // The lock's acquire keeps its checks and leaves the fair lock's and the semaphores' out.
        let acquire = &LOCK_ACQUIRE.lua().code;
        for kept in [
            "ms_arg",
            "wrong_type",
            "not_a_lock",
            "not_a_lock_hash",
            "holder_shaped",
        ] {
            assert!(
                acquire.contains(&format!("local function {kept}(")),
                "{kept}"
            );
        }
        for left in [
            "purge_stale_heads",
            "move_up",
            "counter_of",
            "reclaim",
            "not_a_rwlock",
        ] {
            assert!(!names(acquire, left), "{left}");
        }
    }
}
