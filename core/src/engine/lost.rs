//! What a client tells its application about a hold found lost: [`LostLock`], its
//! [`LostReason`], and the [`LostListener`] that hears of it.

use std::sync::Arc;

use crate::kinds::LockKind;
use crate::owner::Owner;

/// Why a hold was found lost.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::LostReason;
/// client.on_lock_lost(|lost| match lost.reason {
///     LostReason::Gone => eprintln!("{} was deleted or expired in Redis", lost.name),
///     _ => eprintln!("{} may be held by someone else: {}", lost.name, lost.reason),
/// });
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal found the lock gone in Redis (it expired, was force-unlocked or deleted).
    Gone,
    /// No renewal was confirmed before the last confirmed lease ran out (Redis unreachable, a
    /// partition, a paused process), or a hold taken with an explicit lease outlived it: the lock
    /// may now be held by someone else.
    Expired,
}

impl std::fmt::Display for LostReason {
    /// Why, in words: `a renewal found it gone (…)` or `its lease ran out before a renewal was
    /// confirmed (…)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::Gone => {
                "a renewal found it gone (it expired, was force-unlocked or deleted)"
            }
            LostReason::Expired => {
                "its lease ran out before a renewal was confirmed (Redis unreachable, a partition, \
                 a paused process, or an explicit lease outlived)"
            }
        })
    }
}

/// A hold of this client found lost.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// client.on_lock_lost(|lost| eprintln!("lock {} lost by {}: {}", lost.name, lost.holder, lost.reason));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LostLock {
    /// The lock's name.
    pub name: String,
    /// The owner that held it.
    pub owner: Owner,
    /// The holder string Redis stored (`<client-uuid>:<n>`, `…:write` for a write lock).
    pub holder: String,
    /// The kind of lock.
    pub kind: LockKind,
    /// Why it is considered lost.
    pub reason: LostReason,
}

/// Called (on a runtime thread) for every hold found lost.
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use std::sync::Arc;
/// let listener: crosslock::LostListener = Arc::new(|lost| eprintln!("lost {}", lost.name));
/// let l = listener.clone();
/// client.on_lock_lost(move |lost| l(lost));
/// # Ok(()) }
/// ```
pub type LostListener = Arc<dyn Fn(LostLock) + Send + Sync>;
