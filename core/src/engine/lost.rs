//! What a client tells its application about a hold found lost: [`LostLock`], its
//! [`LostReason`], and the [`LostListener`] that hears of it.

use std::sync::Arc;

use crate::kinds::LockKind;
use crate::owner::Owner;

pub(crate) use crate::telemetry::LostReason;

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
    /// The owner that held it; `None` for a permit of a
    /// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), which belongs to nobody
    /// (`holder` is its id).
    pub owner: Option<Owner>,
    /// The holder string Redis stored (`<client-uuid>:<n>`, `…:write` for a write lock; a
    /// permit's id).
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
