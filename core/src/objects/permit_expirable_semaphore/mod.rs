//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore`, and its [`Permit`].
//!
//! This file holds the semaphore and its keys, scripts and hold; [`Permit`] is in `permit`.

mod permit;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::AcquireOptions;
use crate::engine::holds::{Acquired, Closing, HoldKey, PermitId, Releaser, RenewKind};
use crate::engine::unowned;
use crate::engine::wait::{self, Keeper, Outcome};
use crate::engine::{Attempt, Protocol, Request, Waiting, WakePolicy, epoch_ms};
use crate::error::{Error, ErrorKind, Result};
use crate::kinds::LockKind;
use crate::scripts;
use crate::session::Ctx;
use crate::telemetry::{self, ObjectType};
use crate::util::RetryPause;

use super::{check_name, ms, object_type};
use crate::layout;

pub use permit::Permit;

const KIND: &str = "permit-expirable semaphore";

#[derive(Debug)]
struct Keys {
    name: Arc<str>,
    /// `{name}:timeout`: permit id (16 raw bytes) → expiry (epoch ms).
    timeouts: Arc<str>,
    /// `redisson_sc:{name}`, shared with `Semaphore`.
    channel: String,
}

impl Keys {
    /// The keys of the semaphore named `name` (a checked name).
    fn new(name: Arc<str>) -> Self {
        Keys {
            timeouts: Keys::timeouts_of(&name),
            channel: layout::semaphore_channel(&name),
            name,
        }
    }

    /// `{name}:timeout`, the permits' sorted set of the semaphore named `name`.
    fn timeouts_of(name: &str) -> Arc<str> {
        Arc::from(layout::permit_timeouts(name))
    }

    fn keys(&self) -> [&str; 3] {
        [&self.name, &self.timeouts, &self.channel]
    }

    async fn release(&self, cx: &Ctx, id: &str) -> Result<i64> {
        cx.conn
            .eval(
                &scripts::PES_RELEASE,
                &[&self.name, &self.channel, &self.timeouts],
                &[&id, &epoch_ms(), &cx.conn.publish_command()],
                (KIND, &*self.name),
            )
            .await
    }

    /// Releases `id` as [`release`](Self::release) does (1: released, 0: no such permit), and
    /// survives a dropped connection: a reply lost to one is retried, with back-off, within the
    /// response timeout, and a retry that finds no permit counts as released (the permit is named
    /// by its id, so it was the lost attempt that released it). When Redis does not answer in
    /// time, the permit stops being renewed here (as a lock's release does), so at worst it
    /// expires after its lease, and the error says so.
    async fn release_retrying(&self, cx: &Ctx, id: &str) -> Result<i64> {
        let bound = cx.response_timeout();
        let run = async {
            let first = self.release(cx, id).await;
            if !first.as_ref().is_err_and(Error::is_unavailable) {
                return first;
            }
            // Boxed: rare, and kept out of the state of every release.
            Box::pin(async {
                let mut pause = RetryPause::new();
                loop {
                    pause.sleep().await;
                    match self.release(cx, id).await {
                        Ok(0) => return Ok(1),
                        Err(e) if e.is_unavailable() => {}
                        other => return other,
                    }
                }
            })
            .await
        };
        match tokio::time::timeout(bound, run).await {
            Ok(released) => released,
            Err(_) => {
                cx.holds.released(&self.hold_key(id), true);
                Err(Error::no_answer((KIND, &*self.name), bound).with_holder(id))
            }
        }
    }

    /// `[available, acquired, expiry of id or -1]`, after reclaiming expired permits.
    async fn info(&self, cx: &Ctx, id: &str) -> Result<[i64; 3]> {
        let reply: Vec<i64> = cx
            .conn
            .eval(
                &scripts::PES_INFO,
                &self.keys(),
                &[&epoch_ms(), &cx.conn.publish_command(), &id],
                (KIND, &*self.name),
            )
            .await?;
        Ok([
            reply.first().copied().unwrap_or(0),
            reply.get(1).copied().unwrap_or(0),
            reply.get(2).copied().unwrap_or(-1),
        ])
    }

    /// The hold key of permit `id` (one [`acquire`](PermitExpirableSemaphore::acquire) made, or
    /// `check_id` passed) in this client's registry.
    fn hold_key(&self, id: &str) -> HoldKey {
        let id = PermitId::parse(id).expect("a permit id here is 32 hex characters");
        HoldKey::of_permit(self.name.clone(), id)
    }
}

/// One acquire of a permit with id `id`.
struct Take {
    keys: Arc<Keys>,
    id: Arc<str>,
}

impl Protocol for Take {
    type Won = Arc<str>;

    fn name(&self) -> &Arc<str> {
        &self.keys.name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        Waiting::on(&self.keys.channel, WakePolicy::Permits)
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<Arc<str>>> {
        let now = epoch_ms();
        let expiry = now.saturating_add(ms(request.lease));
        let reply: Vec<i64> = cx
            .conn
            .eval_synced(
                &request.acks,
                &scripts::PES_ACQUIRE,
                &self.keys.keys(),
                &[&&*self.id, &expiry, &now, &cx.conn.publish_command()],
                (KIND, &*self.keys.name),
            )
            .await?;
        Ok(match reply.as_slice() {
            [1, ..] => Attempt::Won(self.id.clone()),
            [_, hint] => Attempt::Busy {
                retry_in: u64::try_from(*hint).ok().map(Duration::from_millis),
            },
            _ => Attempt::Busy { retry_in: None },
        })
    }

    async fn settle(&self, cx: &Ctx, _holder: &str, _recorded: usize) -> Result<Option<Arc<str>>> {
        // The id was chosen before sending: the attempt won if it is in the set.
        let [_, _, expiry] = self.keys.info(cx, &self.id).await?;
        Ok((expiry >= 0).then(|| self.id.clone()))
    }

    async fn give_back(self: Arc<Self>, cx: Arc<Ctx>, _: Arc<str>, _: Duration) -> Result<()> {
        self.keys.release(&cx, &self.id).await.map(|_| ())
    }
}

/// Renewal and close-time release of the permits held by this client, from their semaphore's
/// name (the name of their holds).
struct PermitReleaser;

impl Releaser for PermitReleaser {
    fn renew_kind(&self, name: &Arc<str>) -> RenewKind {
        RenewKind::Permit {
            timeouts: Keys::timeouts_of(name),
        }
    }

    fn release_on_close(&self, cx: Arc<Ctx>, name: Arc<str>, holder: Arc<str>) -> Closing {
        Box::pin(async move { Keys::new(name).release(&cx, &holder).await.map(|_| ()) })
    }
}

/// Records a won permit as a hold: renewed by the watchdog without a lease, told when lost.
struct PermitKeeper {
    cx: Arc<Ctx>,
    keys: Arc<Keys>,
    id: Arc<str>,
    lease: Option<Duration>,
}

impl Keeper<Arc<str>> for PermitKeeper {
    fn keep(&self, _won: &Arc<str>, sent: Instant) -> bool {
        let acquired = Acquired {
            holder: self.id.clone(),
            kind: LockKind::Permit,
            releaser: &PermitReleaser,
            lease: self.lease,
            sent,
        };
        self.cx
            .holds
            .acquired(self.keys.hold_key(&self.id), acquired)
    }

    fn recorded(&self) -> usize {
        self.cx.holds.count(&self.keys.hold_key(&self.id))
    }

    fn lease_after(&self) -> Duration {
        Duration::ZERO
    }

    fn unkeep(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let _ = self.keys.release(&self.cx, &self.id).await;
            self.cx.holds.released(&self.keys.hold_key(&self.id), true);
        })
    }
}

object_type! {
    /// A semaphore whose permits have ids and leases, stored exactly as Redisson's
    /// `RPermitExpirableSemaphore`: the available count at the name (shared with
    /// [`Semaphore`](crate::Semaphore)), each taken permit in the sorted set `{name}:timeout` (its 16
    /// random bytes → its expiry), and the channel `redisson_sc:{name}`. An expired permit goes back
    /// to the count at the next operation that looks (any client's).
    ///
    /// A permit is released by its id, by anyone (the id can travel to another process or
    /// language). Taken with a lease, it expires after it. **Taken without one, it is kept by this
    /// client's watchdog** (its expiry is pushed back every third of the watchdog timeout) while this
    /// process lives: a crashed holder's permit comes back after the watchdog timeout, a live
    /// holder's never expires, and if it is lost anyway (released by someone else, Redis out of reach
    /// past its expiry) the holder is told, as for a lock ([`Permit::lost`]). Redisson's permits
    /// without a lease never expire, so a crashed holder's never come back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let seats = client.permit_expirable_semaphore("licences")?;
    /// seats.try_set_permits(10).await?;
    /// let permit = seats.acquire().await?;          // renewed while this process lives
    /// println!("holding {}", permit.id());          // 32 hex characters
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct PermitExpirableSemaphore { keys: Keys }
    what = "semaphore", example = "slots";
    /// A [`PermitExpirableSemaphore`] (Redisson `RPermitExpirableSemaphore`) named `name`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an empty name.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?; // Redisson's getPermitExpirableSemaphore
    /// slots.try_set_permits(2).await?;
    /// # Ok(()) }
    /// ```
    pub fn permit_expirable_semaphore = |client, name| Ok(Keys::new(check_name(client, name, "semaphore")?));
}

impl PermitExpirableSemaphore {
    fn semaphore(&self) -> crate::Semaphore {
        self.client.semaphore(self.name()).expect("a checked name")
    }

    /// Sets the number of permits if none is set yet; `Ok(false)` if it was.
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
    /// client.permit_expirable_semaphore("slots")?.try_set_permits(4).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.semaphore().try_set_permits(permits).await
    }

    /// Adds `permits` (negative: removes) to the available count; returns the new count.
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
    /// let now = client.permit_expirable_semaphore("slots")?.add_permits(2).await?;
    /// println!("{now} available");
    /// # Ok(()) }
    /// ```
    pub async fn add_permits(&self, permits: i64) -> Result<i64> {
        self.semaphore().add_permits(permits).await
    }

    /// How many permits are available now (expired permits counted back first).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave expired permits counted back (no loss: that is all it does).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("{} free", client.permit_expirable_semaphore("slots")?.available_permits().await?);
    /// # Ok(()) }
    /// ```
    pub async fn available_permits(&self) -> Result<i64> {
        let cx = self.cx().await?;
        Ok(self.keys.info(&cx, "").await?[0])
    }

    /// How many permits are taken now (expired permits counted back first).
    ///
    /// # Errors
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`available_permits`](Self::available_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// println!("{} out", client.permit_expirable_semaphore("slots")?.acquired_permits().await?);
    /// # Ok(()) }
    /// ```
    pub async fn acquired_permits(&self) -> Result<i64> {
        let cx = self.cx().await?;
        Ok(self.keys.info(&cx, "").await?[1])
    }

    /// Waits for a permit, kept by the watchdog while this process holds it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] (Redis unreachable longer than the connect timeout),
    /// [`ErrorKind::WrongType`], [`ErrorKind::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: a permit an attempt in flight took is given
    /// back.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let permit = client.permit_expirable_semaphore("slots")?.acquire().await?;
    /// println!("permit {}", permit.id());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<Permit> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Takes a permit within `options.wait` (a deadline) or until `options.cancel` is cancelled,
    /// expiring after `options.lease` (none: kept by the watchdog); fails with
    /// [`ErrorKind::Timeout`] when the wait limit passes. `options.owner` does not apply (refused).
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
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let options = crosslock::AcquireOptions::new().lease(Duration::from_secs(60));
    /// let permit = slots.acquire_with(options).await?; // expires after 60 s unless released
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<Permit> {
        let wait = options.wait;
        match self.try_acquire(options).await? {
            Some(permit) => Ok(permit),
            None => Err(self.timeout_error(wait.unwrap_or_default()).await),
        }
    }

    /// As [`acquire_with`](Self::acquire_with), answering `Ok(None)` when the wait limit passed
    /// (a `wait` of zero: one try).
    ///
    /// # Errors
    ///
    /// As [`acquire_with`](Self::acquire_with), except the timeout.
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
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_millis(200));
    /// if let Some(permit) = slots.try_acquire(options).await? {
    ///     permit.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, options: AcquireOptions) -> Result<Option<Permit>> {
        let start = Instant::now();
        let telemetry = self.client.options().telemetry.as_ref();
        let object = ObjectType::PermitExpirableSemaphore;
        telemetry::measured(telemetry, object, self.name(), start, async {
            self.acquire_from(start, options).await
        })
        .await
    }

    /// [`try_acquire`](Self::try_acquire), unmeasured, for a call made at `start`.
    async fn acquire_from(
        &self,
        start: Instant,
        options: AcquireOptions,
    ) -> Result<Option<Permit>> {
        if options.owner.is_some() {
            return Err(Error::invalid(format!(
                "{KIND} '{}': permits have no owner; leave it out",
                self.name()
            ))
            .with_lock(self.name()));
        }
        options.validate(self.name())?;
        let cx = self.cx().await?;
        let gate = format!("permit_expirable_semaphore:{}", self.name());
        let Some(_turn) = unowned::turn(
            &cx,
            &gate,
            self.name(),
            options.wait,
            options.cancel.as_ref(),
            start,
        )
        .await?
        else {
            return Ok(None);
        };
        let id: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string());
        let keeper = Arc::new(PermitKeeper {
            cx: cx.clone(),
            keys: self.keys.clone(),
            id: id.clone(),
            lease: options.lease,
        });
        let request = Request::new(
            id.clone(),
            options.lease.unwrap_or(cx.watchdog_timeout),
            options.wait,
        );
        let proto = Arc::new(Take {
            keys: self.keys.clone(),
            id: id.clone(),
        });
        let outcome = wait::acquire(wait::Acquire {
            cx: cx.clone(),
            proto,
            keeper,
            request,
            cancel: options.cancel,
            start,
        })
        .await?;
        Ok(match outcome {
            Outcome::Won(id) => {
                let lost = cx.holds.token(&self.keys.hold_key(&id)).unwrap_or_default();
                Some(Permit {
                    sem: Some(self.clone()),
                    id,
                    lost,
                })
            }
            Outcome::TimedOut => None,
        })
    }

    /// The [`ErrorKind::Timeout`] error of a wait for a permit that lasted `waited`.
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
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let started = Instant::now();
    /// let options = crosslock::AcquireOptions::new().wait(Duration::from_millis(100));
    /// if slots.try_acquire(options).await?.is_none() {
    ///     return Err(slots.timeout_error(started.elapsed()).await);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn timeout_error(&self, waited: Duration) -> Error {
        Error::new(
            ErrorKind::Timeout,
            format!(
                "gave up waiting for a permit of {KIND} '{}' after {:.3}s; retry later or allow a \
                 longer wait",
                self.name(),
                waited.as_secs_f64()
            ),
        )
        .with_lock(self.name())
        .with_waited(waited)
    }

    /// Releases the permit `id` (anyone may, from any process or language): `Ok(true)` when it was
    /// taken and unexpired, `Ok(false)` when there is no such permit (already released, or
    /// expired and counted back) or it had expired.
    ///
    /// A reply lost to a dropped connection is retried within the response timeout (a permit is
    /// named by its id, so a release that did happen is not counted twice).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for an id that is not 32 hex characters, and those of
    /// [`try_set_permits`](Self::try_set_permits). [`ErrorKind::Unavailable`] when Redis did not
    /// answer within the response timeout: this process then stops renewing the permit, which
    /// comes back after its lease at worst.
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let id = slots.acquire().await?.detach();
    /// assert!(slots.try_release(&id).await?);
    /// # Ok(()) }
    /// ```
    pub async fn try_release(&self, id: &str) -> Result<bool> {
        let id = check_id(self.name(), id)?;
        let cx = self.cx().await?;
        let released = self.keys.release_retrying(&cx, &id).await?;
        cx.holds.released(&self.keys.hold_key(&id), true);
        Ok(released == 1)
    }

    /// Releases the permit `id`, failing when it cannot (Redisson's `release(id)`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotHeld`] when there is no such permit (already released, or reclaimed after
    /// it expired), [`ErrorKind::LockLost`] when it had expired (it is counted back all the same),
    /// and those of [`try_release`](Self::try_release).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let id = slots.acquire().await?.detach(); // e.g. handed to another task by id
    /// slots.release(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, id: &str) -> Result<()> {
        let id = check_id(self.name(), id)?;
        let cx = self.cx().await?;
        let key = self.keys.hold_key(&id);
        let was_lost = cx.holds.is_lost(&key);
        let released = self.keys.release_retrying(&cx, &id).await?;
        cx.holds.released(&key, true);
        match released {
            1 if !was_lost => Ok(()),
            0 => Err(Error::new(
                ErrorKind::NotHeld,
                format!(
                    "permit {id} of {KIND} '{}' has already been released or does not exist (an \
                     expired permit is counted back by the next operation); nothing changed",
                    self.name()
                ),
            )
            .with_lock(self.name())
            .with_holder(&*id)),
            _ => Err(Error::new(
                ErrorKind::LockLost,
                format!(
                    "permit {id} of {KIND} '{}' expired before it was released: it was counted \
                     back, and another holder may have used it meanwhile; use a longer lease, or \
                     none (the watchdog keeps it)",
                    self.name()
                ),
            )
            .with_lock(self.name())
            .with_holder(&*id)),
        }
    }

    /// Whether this client's permit `id` may be lost (and was not released since): a renewal
    /// found it gone, or its last confirmed lease's deadline has passed. Decided on the spot from
    /// the clock (no round trip), so it is true at once after a pause past the deadline; the
    /// permit's token and the client's lost-lock listener are told then, once.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let permit = slots.acquire().await?;
    /// assert!(!slots.is_lost(permit.id()));
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self, id: &str) -> bool {
        let Ok(id) = check_id(self.name(), id) else {
            return false;
        };
        self.client
            .state_now()
            .is_some_and(|cx| cx.holds.is_lost(&self.keys.hold_key(&id)))
    }

    /// A token cancelled when this client's permit `id` may be lost (see [`Permit::lost`]);
    /// `None` when this client does not track it.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let permit = slots.acquire().await?;
    /// let lost = slots.lost_token(permit.id()).expect("held here");
    /// assert!(!lost.is_cancelled());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn lost_token(&self, id: &str) -> Option<CancellationToken> {
        let id = check_id(self.name(), id).ok()?;
        let cx = self.client.state_now()?;
        let key = self.keys.hold_key(&id);
        // Handed out cancelled if the deadline has passed already.
        let _ = cx.holds.is_lost(&key);
        cx.holds.token(&key)
    }

    /// Sets the permit `id` to expire `lease` from now; `Ok(false)` when there is no such permit.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] for a bad id or a lease outside 1 ms ..= 2^53−1 ms, and those
    /// of [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use std::time::Duration;
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let id = slots.acquire().await?.detach();
    /// slots.update_lease(&id, Duration::from_secs(120)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        let id = check_id(self.name(), id)?;
        AcquireOptions::new().lease(lease).validate(self.name())?;
        let cx = self.cx().await?;
        let now = epoch_ms();
        let updated: i64 = cx
            .conn
            .eval(
                &scripts::PES_UPDATE_LEASE,
                &self.keys.keys(),
                &[
                    &&*id,
                    &now.saturating_add(ms(lease)),
                    &now,
                    &cx.conn.publish_command(),
                ],
                (KIND, self.name()),
            )
            .await?;
        Ok(updated == 1)
    }

    /// The time left before permit `id` expires: `None` when there is no such permit,
    /// `Some(Duration::MAX)` when it never expires (a Redisson permit without a lease).
    ///
    /// # Errors
    ///
    /// As [`update_lease`](Self::update_lease).
    ///
    /// # Cancel safety
    ///
    /// As [`available_permits`](Self::available_permits).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let slots = client.permit_expirable_semaphore("slots")?;
    /// let permit = slots.acquire().await?;
    /// println!("{:?} left", slots.remaining_lease(permit.id()).await?);
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remaining_lease(&self, id: &str) -> Result<Option<Duration>> {
        let id = check_id(self.name(), id)?;
        let cx = self.cx().await?;
        let [_, _, expiry] = self.keys.info(&cx, &id).await?;
        Ok(match expiry {
            -1 => None,
            922_337_203_685_477 => Some(Duration::MAX),
            at => Some(Duration::from_millis(
                (at as u64).saturating_sub(epoch_ms()),
            )),
        })
    }
}

fn check_id(name: &str, id: &str) -> Result<Arc<str>> {
    let id = id.trim().to_ascii_lowercase();
    if PermitId::parse(&id).is_none() {
        return Err(Error::invalid(format!(
            "{KIND} '{name}': a permit id is 32 hex characters (as acquire returns it), got {id:?}"
        ))
        .with_lock(name));
    }
    Ok(Arc::from(id))
}
