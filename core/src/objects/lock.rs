//! [`Lock`]: Redisson's `RLock`.

use std::sync::Arc;

use crate::client::Client;
use crate::engine::family::{Family, LockCore};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::scripts;

use super::hash::{Flavour, HashLock, LazySynced};
use super::{check_name, lock_type};

/// The RLock: a hash at the name, `0` on `redisson_lock__channel:{name}` at release; every hook
/// is [`Flavour`]'s own.
#[derive(Debug)]
pub(crate) struct RLock;

impl Flavour for RLock {
    type Won = ();
    const KIND: LockKind = LockKind::Lock;
    const ACQUIRE: &'static LazySynced = &scripts::LOCK_ACQUIRE;

    fn for_name(_name: &Arc<str>) -> Self {
        RLock
    }
}

lock_type! {
    /// A reentrant distributed lock, stored exactly as Redisson's `RLock`.
    ///
    /// Redis holds a hash at the lock's name with one field, `<client-uuid>:<n>` → hold count, and
    /// a TTL: the lease. The holder that owns that field may re-enter; everyone else waits, woken by
    /// the `0` published on `redisson_lock__channel:{name}` when the lock is fully released. A Java
    /// service on Redisson calling `getLock(name)` takes part in the same exclusion, and so do
    /// [`FencedLock`](crate::FencedLock), [`SpinLock`](crate::SpinLock) and
    /// [`NonReentrantLock`](crate::NonReentrantLock) on the same name (they share the hash).
    ///
    /// Without a lease the lock is kept by the watchdog: a 30 s lease (the client's
    /// `watchdog_timeout`) renewed every 10 s while this process lives and holds it. With a lease it
    /// simply expires after it. Either way the holder is told when the lock may be lost
    /// ([`LockGuard::lost`](crate::LockGuard::lost)).
    ///
    /// A `Lock` is a cheap handle (name + client); clone it freely.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// use crosslock::AcquireOptions;
    ///
    /// let lock = client.lock("orders:42")?;
    /// let guard = lock.acquire().await?;           // waits as long as it takes
    /// // ... exclusive work ...
    /// guard.release().await?;
    ///
    /// // Give up after 2 s; expire after 10 s even if this process hangs.
    /// let options = AcquireOptions::new().wait(Duration::from_secs(2)).lease(Duration::from_secs(10));
    /// match lock.acquire_with(options).await {
    ///     Ok(guard) => guard.release().await?,
    ///     Err(e) if e.is_timeout() => println!("busy: {e}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub struct Lock(HashLock<RLock>) -> ();
    what = "lock";
}

impl Lock {
    /// The channel its releases are published on: `redisson_lock__channel:{name}`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// assert_eq!(client.lock("orders:42")?.channel(), "redisson_lock__channel:{orders:42}");
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        self.core.proto.hash.channel()
    }
}

impl Client {
    /// A [`Lock`] (Redisson `RLock`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.lock("orders:42")?.acquire().await?; // Redisson's getLock("orders:42")
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Result<Lock> {
        let name = check_name(self, name, "lock")?;
        Ok(Lock {
            core: LockCore::new(self.clone(), HashLock::<RLock>::for_name(name)),
        })
    }
}
