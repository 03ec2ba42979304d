//! [`NonReentrantLock`]: Redisson's non-reentrant lock.

use std::sync::Arc;

use crate::client::Client;
use crate::engine::family::{Family, LockCore};
use crate::engine::holds::{HoldKey, Suffix};
use crate::error::{Error, ErrorKind, Result};
use crate::kinds::LockKind;
use crate::owner::Owner;
use crate::scripts;
use crate::session::Ctx;

use super::hash::{Flavour, HashLock, LazySynced};
use super::{check_name, lock_type};

/// The non-reentrant lock: the RLock's hash and channel; a second acquire by the holder is
/// refused.
#[derive(Debug)]
pub(crate) struct NonReentrant;

impl Flavour for NonReentrant {
    type Won = ();
    const KIND: LockKind = LockKind::NonReentrantLock;
    const ACQUIRE: &'static LazySynced = &scripts::NON_REENTRANT_ACQUIRE;

    fn for_name(_name: &Arc<str>) -> Self {
        NonReentrant
    }

    fn precheck(lock: &HashLock<Self>, cx: &Ctx, owner: Owner) -> Result<()> {
        refuse_reentry(cx, &lock.hash.name, owner, "non-reentrant lock")
    }
}

/// The refusal of a non-reentrant lock's second acquire by its holder (a [`NonReentrantLock`] or
/// a [`NonReentrantFairLock`](crate::NonReentrantFairLock)), made from what this process records
/// before anything is sent; `what` is the kind in the message.
pub(crate) fn refuse_reentry(cx: &Ctx, name: &Arc<str>, owner: Owner, what: &str) -> Result<()> {
    let key = HoldKey::of_owner(name.clone(), owner, Suffix::None);
    if cx.holds.count(&key) > 0 && !cx.holds.is_lost(&key) {
        return Err(Error::new(
            ErrorKind::NonReentrant,
            format!(
                "{what} '{name}' is already held by {}: acquiring it again would wait for itself \
                 forever; release it first (Redis is unchanged)",
                cx.holder(owner, Suffix::None)
            ),
        ));
    }
    Ok(())
}

lock_type! {
    /// A lock its holder cannot re-enter: a second acquire by the same owner fails at once with
    /// [`ErrorKind::NonReentrant`], naming the lock, instead of
    /// waiting for itself forever. Stored exactly as Redisson's non-reentrant lock (the `RLock`
    /// hash and channel; Redisson's script answers `NON_REENTRANT_REACQUIRE`), so it excludes
    /// `Lock` holders of the same name.
    ///
    /// Pick it when re-entering would be a bug: the error finds the bug, a reentrant lock would
    /// hide it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.non_reentrant_lock("payments:7")?;
    /// let guard = lock.acquire().await?;
    /// let again = lock.acquire().await.unwrap_err();
    /// assert_eq!(again.kind(), crosslock::ErrorKind::NonReentrant);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct NonReentrantLock(HashLock<NonReentrant>) -> ();
    what = "non-reentrant lock";
}

impl Client {
    /// A [`NonReentrantLock`] named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.non_reentrant_lock("orders:42")?;
    /// let guard = lock.acquire().await?;
    /// assert!(lock.try_acquire().await.is_err()); // a second acquire by its holder is refused
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn non_reentrant_lock(&self, name: &str) -> Result<NonReentrantLock> {
        let name = check_name(self, name, "lock")?;
        Ok(NonReentrantLock {
            core: LockCore::new(self.clone(), HashLock::<NonReentrant>::for_name(name)),
        })
    }
}
