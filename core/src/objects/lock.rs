//! [`Lock`]: Redisson's `RLock`.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::scripts;
use crate::session::Ctx;

use super::{Hash, check_name, lock_type, ms};

/// The RLock protocol: a hash at the name, `0` on `redisson_lock__channel:{name}` at release.
#[derive(Debug)]
pub(crate) struct RLock {
    hash: Hash,
}

impl Protocol for RLock {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.hash.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::PubSub {
            channel: self.hash.channel().to_owned(),
            wake: WakePolicy::Lock,
            linger: None,
        }
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<()>> {
        self.hash
            .attempt(
                &cx,
                &scripts::LOCK_ACQUIRE,
                &[&ms(request.lease), &&*request.holder],
            )
            .await
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<()>> {
        self.hash.settle(cx, holder, recorded).await
    }

    async fn give_back(
        self: Arc<Self>,
        cx: Arc<Ctx>,
        holder: Arc<str>,
        lease_after: Duration,
    ) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, lease_after, None, false, false)
            .await
            .map(|_| ())
    }
}

impl Family for RLock {
    const KIND: LockKind = LockKind::Lock;

    fn for_name(name: Arc<str>) -> Self {
        RLock {
            hash: Hash::new(name),
        }
    }

    async fn unlock(
        &self,
        cx: &Ctx,
        holder: &str,
        lease_after: Duration,
        retry_of: Option<usize>,
    ) -> Result<Option<bool>> {
        self.hash
            .unlock(cx, holder, lease_after, retry_of, false, false)
            .await
    }

    async fn release_all(self: Arc<Self>, cx: Arc<Ctx>, holder: Arc<str>) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, Duration::ZERO, None, true, false)
            .await
            .map(|_| ())
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        self.hash.force_unlock(cx, false).await
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.hash.info(cx, holder).await
    }

    fn token(_won: &()) -> Option<u64> {
        None
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
    pub struct Lock(RLock) -> ();
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
            core: LockCore::new(self.clone(), RLock::for_name(name)),
        })
    }
}
