//! [`Semaphore`]: Redisson's `RSemaphore`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::AcquireOptions;
use crate::engine::unowned;
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy};
use crate::error::{Error, ErrorKind, Result};
use crate::scripts;
use crate::session::Ctx;
use crate::telemetry::{self, ObjectType};

use super::keyed::Keyed;
use super::{check_name, object_type};
use crate::layout;

const KIND: &str = "semaphore";

/// A semaphore's counter (at its name) and channel.
pub(crate) type Counter = Keyed;

impl Keyed {
    /// The counter of the semaphore named `name` (a checked name).
    fn counter(name: Arc<str>) -> Self {
        let channel = layout::semaphore_channel(&name);
        Keyed::new(name, channel, KIND)
    }

    /// Gives `permits` back, creating the counter; the permits available after.
    async fn release(&self, cx: &Ctx, permits: u32) -> Result<i64> {
        self.eval_publishing(cx, &scripts::SEMAPHORE_RELEASE, &[&permits])
            .await
    }

    /// As [`release`](Self::release), but an absent counter stays absent: `None` then.
    async fn release_if_exists(&self, cx: &Ctx, permits: u32) -> Result<Option<i64>> {
        cx.conn
            .eval(
                &scripts::SEMAPHORE_RELEASE,
                &[&self.name, &self.channel],
                &[&permits, &cx.conn.publish_command(), &"if_exists"],
                (KIND, &*self.name),
            )
            .await
    }
}

/// One acquire of `permits` permits (the protocol object lives as long as the call).
struct Take {
    counter: Arc<Counter>,
    permits: u32,
}

impl Protocol for Take {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.counter.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::on(&self.counter.channel, WakePolicy::Permits)
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<()>> {
        let taken: i64 = cx
            .conn
            .eval_synced(
                &request.acks,
                &scripts::SEMAPHORE_ACQUIRE,
                &[&self.counter.name],
                &[&self.permits],
                (KIND, &*self.counter.name),
            )
            .await?;
        Ok(if taken == 1 {
            Attempt::Won(())
        } else {
            Attempt::Busy { retry_in: None }
        })
    }

    fn can_settle(&self) -> bool {
        false
    }

    async fn settle(&self, _cx: &Ctx, _holder: &str, _recorded: usize) -> Result<Option<()>> {
        Ok(None)
    }

    async fn give_back(self: Arc<Self>, cx: Arc<Ctx>, _: Arc<str>, _: Duration) -> Result<()> {
        self.counter.release(&cx, self.permits).await.map(|_| ())
    }
}

object_type! {
    /// A counting semaphore shared by every process on the same Redis, stored exactly as Redisson's
    /// `RSemaphore`: a string at the name holding the number of available permits, and the channel
    /// `redisson_sc:{name}`, on which every release publishes how many are now available.
    ///
    /// Permits belong to nobody: any client, in any language, may release them, and they do not
    /// expire. **A process that crashes while it has permits never gives them back**: use a
    /// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) when that matters.
    ///
    /// An absent counter has no permits: set some with [`try_set_permits`](Self::try_set_permits) (or
    /// [`add_permits`](Self::add_permits), [`release`](Self::release)) before anyone acquires.
    ///
    /// What it does that Redisson's does not: waiters of one process take their turns in order (a
    /// local FIFO queue), so a waiter for several permits is never starved by later ones taking
    /// single permits; and a release wakes one waiter per process, not every one.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.semaphore("render-slots")?;
    /// slots.try_set_permits(4).await?;        // once, by whoever sets it up
    /// slots.acquire(1).await?;                // waits for a permit
    /// // ... at most 4 of these run at once, across every process ...
    /// slots.release(1).await?;
    /// # Ok(()) }
    /// ```
    pub struct Semaphore { counter: Counter }
    what = "semaphore", example = "pool";
    /// A [`Semaphore`] (Redisson `RSemaphore`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let pool = client.semaphore("pool")?; // Redisson's getSemaphore("pool")
    /// pool.try_set_permits(3).await?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore = |client, name| Ok(Keyed::counter(check_name(client, name, "semaphore")?));
}

impl Semaphore {
    /// Sets the number of permits if the semaphore has none set yet; `Ok(false)` if it had.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::WrongType`] (the name holds other data), [`ErrorKind::Unavailable`],
    /// [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may or may not stop the change (the command may already be sent).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let pool = client.semaphore("pool")?;
    /// if pool.try_set_permits(10).await? {
    ///     println!("created with 10 permits");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let cx = self.cx().await?;
        let set: i64 = self
            .counter
            .eval_publishing(&cx, &scripts::SEMAPHORE_TRY_SET, &[&permits])
            .await?;
        Ok(set == 1)
    }

    /// Adds `permits` (negative: removes) to what is available, creating the counter; returns the
    /// new count, which may be negative.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for `permits` outside
    /// Redisson's `int` ([`limits::PERMIT_DELTA`](crate::limits::PERMIT_DELTA)), before anything
    /// is sent; otherwise as [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let now = client.semaphore("pool")?.add_permits(5).await?;
    /// println!("{now} permits available");
    /// # Ok(()) }
    /// ```
    pub async fn add_permits(&self, permits: i64) -> Result<i64> {
        crate::limits::PERMIT_DELTA
            .check(
                permits,
                &format!("the permits to add to semaphore '{}'", self.name()),
            )
            .map_err(|e| e.with_lock(self.name()))?;
        let cx = self.cx().await?;
        self.counter
            .eval_publishing(&cx, &scripts::SEMAPHORE_ADD, &[&permits])
            .await
    }

    /// How many permits are available now (0 when none were ever set).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// A query: dropping the future changes nothing.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("{} free", client.semaphore("pool")?.available_permits().await?);
    /// # Ok(()) }
    /// ```
    pub async fn available_permits(&self) -> Result<i64> {
        let cx = self.cx().await?;
        self.counter
            .eval(&cx, &scripts::SEMAPHORE_AVAILABLE, &[])
            .await
    }

    /// Takes every available permit; returns how many that was.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let taken = client.semaphore("pool")?.drain_permits().await?;
    /// println!("took the {taken} permits that were left");
    /// # Ok(()) }
    /// ```
    pub async fn drain_permits(&self) -> Result<i64> {
        let cx = self.cx().await?;
        self.counter.eval(&cx, &scripts::SEMAPHORE_DRAIN, &[]).await
    }

    /// Gives `permits` back (anyone may: permits have no owner) and wakes waiters.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for 0 permits, and those of
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let pool = client.semaphore("pool")?;
    /// pool.acquire(2).await?;
    /// // ... use two connections ...
    /// pool.release(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, permits: u32) -> Result<()> {
        self.check_release(permits)?;
        let cx = self.cx().await?;
        self.counter.release(&cx, permits).await.map(|_| ())
    }

    /// Gives `permits` back only if the semaphore exists (Redisson's `releaseIfExists`): whether
    /// it did. An absent counter (never set up, or deleted) is left absent, nothing is published,
    /// and the answer is `false`; [`release`](Self::release) would create it.
    ///
    /// # Errors
    ///
    /// As [`release`](Self::release).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let pool = client.semaphore("pool")?;
    /// assert!(!pool.release_if_exists(1).await?); // never set up: still absent
    /// pool.try_set_permits(0).await?;
    /// assert!(pool.release_if_exists(1).await?);
    /// # Ok(()) }
    /// ```
    pub async fn release_if_exists(&self, permits: u32) -> Result<bool> {
        self.check_release(permits)?;
        let cx = self.cx().await?;
        self.counter
            .release_if_exists(&cx, permits)
            .await
            .map(|available| available.is_some())
    }

    /// A release gives back at least one permit.
    fn check_release(&self, permits: u32) -> Result<()> {
        if permits == 0 {
            return Err(Error::invalid(format!(
                "semaphore '{}': release at least 1 permit (got 0)",
                self.name()
            ))
            .with_lock(self.name()));
        }
        Ok(())
    }

    /// Waits until `permits` permits are taken (0 returns at once).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] (Redis unreachable longer than the connect timeout or at the
    /// end of the wait limit, or an attempt's answer lost after it was sent, when it is unknown
    /// whether the permits were taken; a refused connection is waited out),
    /// [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: permits an attempt in flight took are given
    /// back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let pool = client.semaphore("pool")?;
    /// pool.acquire(1).await?; // waits for a release if none is free
    /// pool.release(1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<()> {
        self.acquire_with(permits, AcquireOptions::new()).await
    }

    /// Takes `permits` permits within `options.wait` (a deadline; none: as long as it takes) or
    /// until `options.cancel` is cancelled; fails with [`ErrorKind::Timeout`] when the wait limit
    /// passes. `options.lease` and `options.owner` do not apply to a semaphore and are refused.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Timeout`], [`ErrorKind::Cancelled`], [`ErrorKind::InvalidArgument`], and those
    /// of [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let pool = client.semaphore("pool")?;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_secs(1));
    /// pool.acquire_with(1, options).await?; // ErrorKind::Timeout after 1 s
    /// pool.release(1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, permits: u32, options: AcquireOptions) -> Result<()> {
        let wait = options.wait;
        if self.take(permits, options).await? {
            return Ok(());
        }
        Err(self.timeout_error(permits, wait.unwrap_or_default()).await)
    }

    /// Takes `permits` permits if they can be had within `wait` (zero: one try); `Ok(false)`
    /// otherwise.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let pool = client.semaphore("pool")?;
    /// if pool.try_acquire(1, Duration::ZERO).await? {
    ///     pool.release(1).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, permits: u32, wait: Duration) -> Result<bool> {
        self.take(permits, AcquireOptions::new().wait(wait)).await
    }

    /// As [`acquire_with`](Self::acquire_with), answering `Ok(false)` when the wait limit passed.
    #[doc(hidden)]
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Self::acquire).
    pub async fn take(&self, permits: u32, options: AcquireOptions) -> Result<bool> {
        let start = Instant::now();
        let telemetry = self.client.options().telemetry.as_ref();
        let taken = telemetry::measured(
            telemetry,
            ObjectType::Semaphore,
            self.name(),
            start,
            async { self.take_from(start, permits, options).await },
        )
        .await?;
        Ok(taken.is_some())
    }

    /// [`take`](Self::take), unmeasured, for a call made at `start`; `Some` when taken.
    async fn take_from(
        &self,
        start: Instant,
        permits: u32,
        options: AcquireOptions,
    ) -> Result<Option<()>> {
        if options.lease.is_some() || options.owner.is_some() {
            return Err(Error::invalid(format!(
                "semaphore '{}': permits have no lease and no owner; leave them out",
                self.name()
            ))
            .with_lock(self.name()));
        }
        options.validate(self.name())?;
        if permits == 0 {
            return Ok(Some(()));
        }
        let cx = self.cx().await?;
        let proto = Arc::new(Take {
            counter: self.counter.clone(),
            permits,
        });
        let gate = format!("semaphore:{}", self.name());
        unowned::acquire(cx, proto, Some(&gate), options.wait, options.cancel, start).await
    }

    /// The [`ErrorKind::Timeout`] error of a wait for `permits` permits that lasted `waited`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::{Duration, Instant};
    /// let pool = client.semaphore("pool")?;
    /// let started = Instant::now();
    /// if !pool.try_acquire(1, Duration::from_millis(100)).await? {
    ///     return Err(pool.timeout_error(1, started.elapsed()).await);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn timeout_error(&self, permits: u32, waited: Duration) -> Error {
        let available = match tokio::time::timeout(
            Duration::from_millis(200),
            self.available_permits(),
        )
        .await
        {
            Ok(Ok(n)) => format!(" ({n} available)"),
            _ => String::new(),
        };
        Error::new(
            ErrorKind::Timeout,
            format!(
                "gave up waiting for {permits} permit{} of semaphore '{}' after {:.3}s{available}; \
                 retry later or allow a longer wait",
                if permits == 1 { "" } else { "s" },
                self.name(),
                waited.as_secs_f64()
            ),
        )
        .with_lock(self.name())
        .with_waited(waited)
    }

    /// Deletes the semaphore's counter; `Ok(true)` if it existed.
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// client.semaphore("pool")?.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<bool> {
        let cx = self.cx().await?;
        let deleted: i64 = self
            .counter
            .eval(&cx, &scripts::COUNTER_DELETE, &[&"a permit count"])
            .await?;
        Ok(deleted == 1)
    }
}
