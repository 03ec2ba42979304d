//! Where Redisson keeps each object: every Redisson key and channel name crosslock builds, in the
//! order of `docs/protocol.md` (its Conventions first, then one section per object). No other
//! module formats one; the Lua scripts get theirs as arguments.

// -- Conventions ---------------------------------------------------------------------------------

/// `{name}`, or the name itself when it already has braces: the hash-tagged form Redisson's
/// suffixed keys start with (one hash slot for an object's keys on a cluster).
pub(crate) fn tagged(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        let mut out = String::with_capacity(name.len() + 2);
        out.push('{');
        out.push_str(name);
        out.push('}');
        out
    }
}

/// Redisson's `prefixName`: `prefix:{name}`, or `prefix:name` when the name already has braces.
/// (Built in one allocation: `format!` grows its string two or three times for these, and in
/// Node a release makes its channel's name every time.)
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    let tag = !name.contains('{');
    let mut out = String::with_capacity(prefix.len() + name.len() + 3);
    out.push_str(prefix);
    out.push(':');
    if tag {
        out.push('{');
    }
    out.push_str(name);
    if tag {
        out.push('}');
    }
    out
}

/// Redisson's `suffixName`: `{name}:suffix`, or `name:suffix` when the name already has braces.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    let tag = !name.contains('{');
    let mut out = String::with_capacity(name.len() + suffix.len() + 3);
    if tag {
        out.push('{');
    }
    out.push_str(name);
    if tag {
        out.push('}');
    }
    out.push(':');
    out.push_str(suffix);
    out
}

/// The names that must share the hash slot of an object named `name` on a cluster, whatever its
/// kind: a prefixed one (its lock channel) and a suffixed one; a latch adds its channel
/// ([`latch_channel`], which braces the whole name).
pub(crate) fn slot_siblings(name: &str) -> [String; 2] {
    [lock_channel(name), suffix_name(name, "permits")]
}

// -- Lock ----------------------------------------------------------------------------------------

/// The prefix of the RLock family's channel.
const LOCK_CHANNEL: &str = "redisson_lock__channel";

/// `redisson_lock__channel:{name}`: where a release of a lock-family hash is published (also a
/// group lock's, at its group's name).
pub(crate) fn lock_channel(name: &str) -> String {
    prefix_name(LOCK_CHANNEL, name)
}

/// The prefix of the unlock latches Redisson 3.40+ keeps beside a lock (never an object alone).
pub(crate) const UNLOCK_LATCH: &str = "redisson_unlock_latch:";

// -- FencedLock ----------------------------------------------------------------------------------

const LOCK_TOKEN: &str = "redisson_lock_token";

/// `redisson_lock_token:{name}`: the fenced lock's token counter.
pub(crate) fn fenced_token(name: &str) -> String {
    prefix_name(LOCK_TOKEN, name)
}

// -- FairLock ------------------------------------------------------------------------------------

const LOCK_QUEUE: &str = "redisson_lock_queue";
const LOCK_TIMEOUT: &str = "redisson_lock_timeout";

/// `redisson_lock_queue:{name}`: the fair lock's waiting holders.
pub(crate) fn fair_queue(name: &str) -> String {
    prefix_name(LOCK_QUEUE, name)
}

/// `redisson_lock_timeout:{name}`: each fair-lock waiter's deadline.
pub(crate) fn fair_timeouts(name: &str) -> String {
    prefix_name(LOCK_TIMEOUT, name)
}

/// `redisson_lock__channel:{name}:<holder>` from the lock's channel: the one waiter's channel.
pub(crate) fn fair_waiter_channel(lock_channel: &str, holder: &str) -> String {
    format!("{lock_channel}:{holder}")
}

/// The prefixes of the keys that stand beside a fair or fenced lock, and name it after the `:`.
pub(crate) const SIBLING_PREFIXES: [&str; 3] = [LOCK_QUEUE, LOCK_TIMEOUT, LOCK_TOKEN];

// -- ReadWriteLock -------------------------------------------------------------------------------

/// `redisson_rwlock:{name}`: the read-write lock's channel.
pub(crate) fn rw_channel(name: &str) -> String {
    prefix_name("redisson_rwlock", name)
}

/// What a read hold's timeout keys are named after (`{name}:<holder>:rwlock_timeout:<k>`).
pub(crate) const RW_TIMEOUT: &str = "rwlock_timeout";

/// `{name}:<holder>:rwlock_timeout`: the prefix of `holder`'s read-hold timeout keys (`…:<k>`).
pub(crate) fn rw_timeout_prefix(name: &str, holder: &str) -> String {
    let mut out = suffix_name(name, holder);
    out.push(':');
    out.push_str(RW_TIMEOUT);
    out
}

// -- Semaphore -----------------------------------------------------------------------------------

/// `redisson_sc:{name}`: the semaphores' channel (the permit-expirable one's too).
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

// -- PermitExpirableSemaphore --------------------------------------------------------------------

/// What the permit-expirable semaphore's sorted set of permits is named after.
pub(crate) const PERMIT_TIMEOUTS: &str = "timeout";

/// `{name}:timeout`: the permit-expirable semaphore's permits and their expiries.
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffix_name(name, PERMIT_TIMEOUTS)
}

// -- CountDownLatch ------------------------------------------------------------------------------

/// `redisson_countdownlatch__channel__{name}`: the latch's channel (the whole name braced, as
/// Redisson does, braces or not).
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

// -- GroupLock: one hash at the group's name, on the group's [`lock_channel`]. --------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_redissons() {
        assert_eq!(
            lock_channel("orders:42"),
            "redisson_lock__channel:{orders:42}"
        );
        assert_eq!(
            lock_channel("{user:1}:lock"),
            "redisson_lock__channel:{user:1}:lock"
        );
        assert_eq!(fenced_token("a"), "redisson_lock_token:{a}");
        assert_eq!(fair_queue("a"), "redisson_lock_queue:{a}");
        assert_eq!(fair_timeouts("a"), "redisson_lock_timeout:{a}");
        assert_eq!(
            fair_waiter_channel(&lock_channel("a"), "id:1"),
            "redisson_lock__channel:{a}:id:1"
        );
        assert_eq!(rw_channel("a"), "redisson_rwlock:{a}");
        assert_eq!(rw_timeout_prefix("a", "id:1"), "{a}:id:1:rwlock_timeout");
        assert_eq!(
            rw_timeout_prefix("{a}b", "id:1"),
            "{a}b:id:1:rwlock_timeout"
        );
        assert_eq!(semaphore_channel("a"), "redisson_sc:{a}");
        assert_eq!(permit_timeouts("a"), "{a}:timeout");
        assert_eq!(
            latch_channel("{a}"),
            "redisson_countdownlatch__channel__{{a}}"
        );
        assert_eq!(tagged("a"), "{a}");
        assert_eq!(tagged("{a}b"), "{a}b");
    }
    #[test]
    fn prefix_adds_hash_tag_once() {
        assert_eq!(prefix_name("p", "orders:42"), "p:{orders:42}");
        assert_eq!(prefix_name("p", "{user:1}:lock"), "p:{user:1}:lock");
    }

    #[test]
    fn suffix_adds_hash_tag_once() {
        assert_eq!(suffix_name("doc", "u:1"), "{doc}:u:1");
        assert_eq!(suffix_name("{doc}:x", "u:1"), "{doc}:x:u:1");
    }
}
