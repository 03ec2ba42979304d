//! [`SpinLock`]: Redisson's `RSpinLock`.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::{Attempt, Backoff, Protocol, Request, Waiting};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::scripts;
use crate::session::Ctx;

use super::{Hash, check_name, lock_type, ms};

/// The spin-lock protocol: the RLock's hash, no channel, a back-off between attempts.
#[derive(Debug)]
pub(crate) struct Spin {
    hash: Hash,
    backoff: Backoff,
}

impl Protocol for Spin {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.hash.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::Backoff(self.backoff)
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
            .unlock(&cx, &holder, lease_after, None, false, true)
            .await
            .map(|_| ())
    }
}

impl Family for Spin {
    const KIND: LockKind = LockKind::SpinLock;

    /// With the default back-off (only waiting uses it).
    fn for_name(name: Arc<str>) -> Self {
        Spin {
            hash: Hash::new(name),
            backoff: Backoff::default(),
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
            .unlock(cx, holder, lease_after, retry_of, false, true)
            .await
    }

    async fn release_all(self: Arc<Self>, cx: Arc<Ctx>, holder: Arc<str>) -> Result<()> {
        self.hash
            .unlock(&cx, &holder, Duration::ZERO, None, true, true)
            .await
            .map(|_| ())
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        self.hash.force_unlock(cx, true).await
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.hash.info(cx, holder).await
    }

    fn token(_won: &()) -> Option<u64> {
        None
    }
}

lock_type! {
    /// A reentrant lock that never subscribes: waiters retry with a back-off instead. Stored
    /// exactly as Redisson's `RSpinLock` (the `RLock` hash; releases publish nothing).
    ///
    /// Use it where pub/sub is scarce or costly: many waiting processes (each subscription holds a
    /// slot on the server), a proxy or managed service without pub/sub, a big cluster where every
    /// publish is broadcast. The price is hand-off latency: a waiter notices a release at its next
    /// retry. The default back-off is Redisson's: 1 ms doubling (with jitter) up to 128 ms;
    /// [`Client::spin_lock_with`] takes another [`Backoff`].
    ///
    /// It excludes [`Lock`](crate::Lock) holders of the same name and the other way round, but its
    /// release wakes no `Lock` waiter (they retry when its lease would have run out).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.spin_lock("reports:nightly")?;
    /// let guard = lock.acquire().await?;   // retries 1 ms, 2 ms, 4 ms, … 128 ms apart
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct SpinLock(Spin) -> ();
    what = "spin lock";
}

impl Client {
    /// A [`SpinLock`] (Redisson `RSpinLock`) named `name`, with Redisson's default back-off.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.spin_lock("jobs")?.acquire().await?; // polls with back-off, no pub/sub
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn spin_lock(&self, name: &str) -> Result<SpinLock> {
        self.spin_lock_with(name, Backoff::default())
    }

    /// A [`SpinLock`] named `name` that pauses `backoff` between attempts.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name or a
    /// back-off outside 0 < initial ≤ max ≤ 1 h.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.spin_lock_with("jobs", crosslock::Backoff::constant(Duration::from_millis(64)))?;
    /// assert_eq!(lock.name(), "jobs");
    /// # Ok(()) }
    /// ```
    pub fn spin_lock_with(&self, name: &str, backoff: Backoff) -> Result<SpinLock> {
        let name = check_name(self, name, "lock")?;
        backoff.validate(&name)?;
        Ok(SpinLock {
            core: LockCore::new(
                self.clone(),
                Spin {
                    backoff,
                    ..Spin::for_name(name)
                },
            ),
        })
    }
}
