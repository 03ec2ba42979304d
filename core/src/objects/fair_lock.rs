//! [`FairLock`]: Redisson's `RFairLock`.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy, epoch_ms};
use crate::error::Result;
use crate::kinds::LockKind;
use crate::owner::Owner;
use crate::scripts;
use crate::session::Ctx;

use super::non_reentrant_lock::refuse_reentry;

use super::hash::Hash;
use super::{Release, check_name, give_back_by_release, lock_type, ms, won_or_busy};
use crate::layout;

/// How long a waiter's channel stays subscribed after it won its wait, for its owner's next wait:
/// under contention an owner that releases and takes the lock again queues again within a
/// millisecond or two, and each wait would otherwise cost a SUBSCRIBE and an UNSUBSCRIBE.
const LINGER: Duration = Duration::from_millis(100);

/// The fair-lock protocol: the RLock's hash, a FIFO queue of waiters with their deadlines, and a
/// channel per waiter, on which only the queue's head is ever woken. `REENTRANT` false is
/// Redisson's non-reentrant fair lock: the same keys and scripts, a second acquire by the holder
/// refused.
#[derive(Debug)]
pub(crate) struct Fair<const REENTRANT: bool> {
    hash: Hash,
    queue: String,
    timeouts: String,
}

impl<const REENTRANT: bool> Fair<REENTRANT> {
    /// How long a waiter may take to come back before it is considered dead: the caller's wait
    /// limit, else the client's `fair_lock_wait_timeout` (Redisson's rule).
    fn fair_wait(cx: &Ctx, request: &Request) -> Duration {
        request
            .wait
            .filter(|w| !w.is_zero())
            .unwrap_or(cx.fair_lock_wait_timeout)
            .max(Duration::from_millis(1))
    }

    fn keys(&self) -> [&str; 4] {
        [
            &self.hash.name,
            &self.queue,
            &self.timeouts,
            self.hash.channel(),
        ]
    }
}

impl<const REENTRANT: bool> Protocol for Fair<REENTRANT> {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.hash.name
    }

    fn waiting(&self, holder: &str) -> Waiting {
        Waiting::PubSub {
            channel: layout::fair_waiter_channel(self.hash.channel(), holder),
            wake: WakePolicy::All,
            // The channel is this owner's own: only its turn is announced there, so keeping it
            // wakes nobody, and an owner that just won a wait is the likeliest to queue again.
            linger: Some(LINGER),
        }
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<()>> {
        let wait = Self::fair_wait(&cx, &request);
        let single = if request.single_try() { "1" } else { "0" };
        let reply: Option<i64> = cx
            .conn
            .eval_synced(
                &request.acks,
                &scripts::FAIR_ACQUIRE,
                &[&self.hash.name, &self.queue, &self.timeouts],
                &[
                    &ms(request.lease),
                    &&*request.holder,
                    &ms(wait),
                    &epoch_ms(),
                    &single,
                    &if REENTRANT { "0" } else { "1" },
                ],
                Some(&self.hash.name),
            )
            .await?;
        Ok(won_or_busy(reply))
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<()>> {
        self.hash.settle(cx, holder, recorded).await
    }

    give_back_by_release!();

    async fn give_up(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<()> {
        if request.single_try() {
            return Ok(()); // a single try never enqueues
        }
        let wait = Self::fair_wait(&cx, &request);
        let _: i64 = cx
            .conn
            .eval(
                &scripts::FAIR_GIVE_UP,
                &[
                    &self.queue,
                    &self.timeouts,
                    &self.hash.name,
                    self.hash.channel(),
                ],
                &[
                    &&*request.holder,
                    &ms(wait),
                    &cx.conn.publish_command(),
                    &epoch_ms(),
                ],
                Some(&self.hash.name),
            )
            .await?;
        Ok(())
    }
}

impl<const REENTRANT: bool> Family for Fair<REENTRANT> {
    const KIND: LockKind = if REENTRANT {
        LockKind::FairLock
    } else {
        LockKind::NonReentrantFairLock
    };

    fn for_name(name: Arc<str>) -> Self {
        Fair {
            queue: layout::fair_queue(&name),
            timeouts: layout::fair_timeouts(&name),
            hash: Hash::new(name),
        }
    }

    fn precheck(&self, cx: &Ctx, owner: Owner) -> Result<()> {
        if REENTRANT {
            return Ok(());
        }
        refuse_reentry(cx, &self.hash.name, owner, "non-reentrant fair lock")
    }

    /// Runs the fair release script (see [`Hash::unlock`]).
    async fn release(&self, cx: &Ctx, holder: &str, release: Release) -> Result<Option<bool>> {
        let (lease_after, retry, count) = release.args();
        let reply: Option<i64> = cx
            .conn
            .eval(
                &scripts::FAIR_RELEASE,
                &self.keys(),
                &[
                    &"0",
                    &lease_after,
                    &holder,
                    &epoch_ms(),
                    &cx.conn.publish_command(),
                    &retry,
                    &count,
                ],
                Some(&self.hash.name),
            )
            .await?;
        Ok(reply.map(|r| r == 1))
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        let deleted: i64 = cx
            .conn
            .eval(
                &scripts::FAIR_FORCE_UNLOCK,
                &self.keys(),
                &[&"0", &epoch_ms(), &cx.conn.publish_command()],
                Some(&self.hash.name),
            )
            .await?;
        Ok(deleted == 1)
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        self.hash.info(cx, holder).await
    }

    fn token(_won: &()) -> Option<u64> {
        None
    }
}

lock_type! {
    /// A reentrant lock handed over in the order its waiters asked, across processes and
    /// languages. Stored exactly as Redisson's `RFairLock`: the `RLock` hash at the name, a FIFO
    /// list of waiting holders at `redisson_lock_queue:{name}`, a sorted set of their deadlines at
    /// `redisson_lock_timeout:{name}`, and one channel per waiter,
    /// `redisson_lock__channel:{name}:<holder>`, on which a release wakes only the queue's head.
    ///
    /// A waiter that gives up (its wait limit passed, it was cancelled) leaves the queue and the
    /// deadline set at once, and everyone behind it moves up, as Redisson's acquire-failed step
    /// does; if it was the head and the lock is free, the new head is woken. A waiter that is
    /// killed stays queued until its deadline passes, then is purged: the client's
    /// `fair_lock_wait_timeout` (Redisson's `fairLockWaitTimeout`, 5 min) — or the waiter's own
    /// wait limit when it gave one — bounds how long a dead waiter can hold up the line.
    ///
    /// What it does that Redisson's does not: a live crosslock waiter **stays in line however long
    /// it waits** — each retry refreshes its own deadline (to its position × the fair wait ahead),
    /// where Redisson's waiter whose deadline passes is purged and re-queued at the tail. And a
    /// queued waiter never spins on a free lock whose head is another (dead) waiter: it sleeps until
    /// that head's deadline.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.fair_lock("printer")?;
    /// let guard = lock.acquire().await?;   // served in the order of asking
    /// guard.release().await?;              // wakes only the next in line
    /// # Ok(()) }
    /// ```
    pub struct FairLock(Fair<true>) -> ();
    what = "fair lock";
}

impl FairLock {
    /// The waiting holders in queue order (head first), as Redis has them now.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType),
    /// [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable),
    /// [`ErrorKind::Redis`](crate::ErrorKind::Redis).
    ///
    /// # Cancel safety
    ///
    /// A query: dropping the future changes nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// for waiter in client.fair_lock("printer")?.queue().await? {
    ///     println!("waiting: {waiter}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn queue(&self) -> Result<Vec<String>> {
        self.core.proto.queue_of(&self.core.client).await
    }
}

impl<const REENTRANT: bool> Fair<REENTRANT> {
    async fn queue_of(&self, client: &Client) -> Result<Vec<String>> {
        let cx = client.state().await?;
        cx.conn
            .query(
                redis::cmd("LRANGE").arg(&self.queue).arg(0).arg(-1),
                Some(&self.queue),
                Some(&*self.hash.name),
            )
            .await
    }
}

lock_type! {
    /// A [`FairLock`] its holder cannot re-enter (Redisson 4.4's non-reentrant fair lock,
    /// `getNonReentrantFairLock`): a second acquire by the same owner fails at once with
    /// [`ErrorKind::NonReentrant`](crate::ErrorKind::NonReentrant), naming the lock, instead of
    /// waiting for itself forever, as a [`NonReentrantLock`](crate::NonReentrantLock) does.
    /// Stored exactly as a `FairLock` (the same hash, queue, deadlines and per-waiter channels),
    /// so it queues with `FairLock` waiters of the same name, in any language and in Redisson.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.non_reentrant_fair_lock("printer")?;
    /// let guard = lock.acquire().await?; // served in the order of asking
    /// let again = lock.acquire().await.unwrap_err();
    /// assert_eq!(again.kind(), crosslock::ErrorKind::NonReentrant);
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct NonReentrantFairLock(Fair<false>) -> ();
    what = "non-reentrant fair lock";
}

impl NonReentrantFairLock {
    /// The waiting holders in queue order (head first), as Redis has them now; as
    /// [`FairLock::queue`].
    ///
    /// # Errors
    ///
    /// As [`FairLock::queue`].
    ///
    /// # Cancel safety
    ///
    /// A query: dropping the future changes nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let waiting = client.non_reentrant_fair_lock("printer")?.queue().await?;
    /// println!("{} waiting", waiting.len());
    /// # Ok(()) }
    /// ```
    pub async fn queue(&self) -> Result<Vec<String>> {
        self.core.proto.queue_of(&self.core.client).await
    }
}

impl Client {
    /// A [`FairLock`] (Redisson `RFairLock`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.fair_lock("printer")?.acquire().await?; // first come, first served
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Result<FairLock> {
        let name = check_name(self, name, "lock")?;
        Ok(FairLock {
            core: LockCore::new(self.clone(), Fair::<true>::for_name(name)),
        })
    }

    /// A [`NonReentrantFairLock`] (Redisson's non-reentrant fair lock) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.non_reentrant_fair_lock("printer")?;
    /// let guard = lock.acquire().await?;
    /// assert!(lock.try_acquire().await.is_err()); // a second acquire by its holder is refused
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn non_reentrant_fair_lock(&self, name: &str) -> Result<NonReentrantFairLock> {
        let name = check_name(self, name, "lock")?;
        Ok(NonReentrantFairLock {
            core: LockCore::new(self.clone(), Fair::<false>::for_name(name)),
        })
    }
}
