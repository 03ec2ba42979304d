//! The RLock family: what every owner-held lock adds to a [`Protocol`], and the generic lock
//! built from it ([`LockCore`], Redisson's `RedissonBaseLock`).
//!
//! A lock type supplies its scripts through [`Family`]; everything else is here, once: the
//! acquire (through [`wait`]), recording holds, the release with its lost-reply retry and its
//! not-held / lost distinction, extending, queries. Beside it, [`guard`](super::guard) holds
//! the [`LockGuard`](super::guard::LockGuard) a win returns, and [`any_lock`](super::any_lock)
//! the type-erased [`AnyLock`](super::any_lock::AnyLock) that the bindings and
//! [`MultiLock`](crate::MultiLock)-style composites hold.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};
use crate::owner::Owner;
use crate::runtime;
use crate::session::Client;
use crate::session::Ctx;
use crate::util::{RetryPause, lock};

use super::holds::{Acquired, Closing, HoldKey, Releaser, RenewKind, Suffix};
use super::lost::LostReason;
use super::wait::{self, Keeper, Outcome};
use super::{MAX_DURATION, Protocol, Request};
use crate::kinds::LockKind;
use crate::options::AcquireOptions;
use crate::telemetry::{self, ObjectType};

/// Why a lock-family hold key has an owner: the family records its holds with `HoldKey::of_owner`.
const FAMILY_KEY: &str = "a lock-family hold is keyed by its owner";

/// Checks the lease an extend sets, naming the lock in the message.
pub(crate) fn check_extend_lease(name: &str, lease: Duration) -> Result<()> {
    if lease < Duration::from_millis(1) || lease > MAX_DURATION {
        return Err(Error::invalid(format!(
            "the lease an extend of lock '{name}' sets must be at least 1 ms and at most 2^53-1 ms \
             (about 285,000 years), got {:.3e} s",
            lease.as_secs_f64()
        ))
        .with_lock(name));
    }
    Ok(())
}

/// What a lock's Redis state says, for queries.
#[derive(Debug, Default)]
pub(crate) struct Info {
    /// The main key's PTTL (-2: absent, -1: no expiry).
    pub(crate) pttl: i64,
    /// Whether this kind of lock counts as locked (a read lock is locked by readers, …).
    pub(crate) locked: bool,
    /// The hold count of the asking holder.
    pub(crate) count: u32,
    /// Every holder string (`<client-uuid>:<n>[:write]`).
    pub(crate) holders: Vec<String>,
}

/// Which holds a release drops.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Release {
    /// One hold; what remains is kept alive for `lease_after`. `retry_of`: on a retry after a
    /// lost reply, the hold count before the first try (so a release is not applied twice).
    One {
        lease_after: Duration,
        retry_of: Option<usize>,
    },
    /// Every hold of the holder (the client closes).
    All,
}

impl Release {
    /// One hold, of the holder's `retry_of` holds on a retry.
    pub(crate) fn one(lease_after: Duration, retry_of: Option<usize>) -> Self {
        Release::One {
            lease_after,
            retry_of,
        }
    }

    /// One win nobody will use (the engine's `give_back`).
    pub(crate) fn give_back(lease_after: Duration) -> Self {
        Release::one(lease_after, None)
    }
}

/// What a lock of the RLock family adds to its [`Protocol`] (Redisson's `RedissonBaseLock` hooks).
pub(crate) trait Family: Protocol {
    /// Which kind of lock this is.
    const KIND: LockKind;

    /// The protocol of the lock named `name` (a checked name), as the client's factory makes it
    /// with its defaults. A hold keeps no protocol object: `close()` makes one from the hold's
    /// name to release it ([`ByName`]).
    fn for_name(name: Arc<str>) -> Self
    where
        Self: Sized;

    /// The lock's name as its users know it, in messages and `name()`: the [`Protocol::name`]
    /// its holds are recorded under, except for a group lock (whose holds are one per set of
    /// values, so recorded under the group and the values' fields).
    fn shown_name(&self) -> &str {
        self.name()
    }

    /// The holder-string suffix (`":write"` for the write lock).
    fn suffix(&self) -> Suffix {
        Suffix::None
    }

    /// How the watchdog renews a hold of the lock named `name`.
    fn renew_kind(name: &Arc<str>) -> RenewKind {
        let _ = name;
        RenewKind::Hash
    }

    /// A check made before anything is sent (the non-reentrant lock refuses a second acquire,
    /// the write lock an upgrade), from what this process records.
    fn precheck(&self, cx: &Ctx, owner: Owner) -> Result<()> {
        let _ = (cx, owner);
        Ok(())
    }

    /// Drops the holds of `holder` that `release` says, with the type's one release script:
    /// [`Release::One`] one hold (`Some(true)` fully released, `Some(false)` holds remain,
    /// `None` the holder holds nothing), [`Release::All`] every hold at once (the client
    /// closes). The engine's `give_back` of a family protocol is this release too
    /// ([`Release::give_back`]).
    fn release(
        &self,
        cx: &Ctx,
        holder: &str,
        release: Release,
    ) -> impl Future<Output = Result<Option<bool>>> + Send;

    /// Deletes the lock whoever holds it; `true` if it was locked.
    fn force_unlock(&self, cx: &Ctx) -> impl Future<Output = Result<bool>> + Send;

    /// What Redis says about the lock, for `holder`.
    fn info(&self, cx: &Ctx, holder: &str) -> impl Future<Output = Result<Info>> + Send;

    /// The fencing token a win carries, if this kind has one.
    fn token(won: &Self::Won) -> Option<u64>;
}

/// The releaser of every hold of protocol `P`: what renewing or releasing a hold needs comes
/// from its name, so a hold points at this one static value instead of keeping its lock's
/// protocol object alive (in Node, where each call makes its lock, that object was ~80 bytes
/// or more per held lock).
pub(crate) struct ByName<P>(PhantomData<fn() -> P>);

impl<P: Family> ByName<P> {
    /// The one releaser of `P`'s holds.
    pub(crate) const RELEASER: &'static dyn Releaser = &ByName::<P>(PhantomData);
}

impl<P: Family> Releaser for ByName<P> {
    fn renew_kind(&self, name: &Arc<str>) -> RenewKind {
        P::renew_kind(name)
    }

    fn release_on_close(&self, cx: Arc<Ctx>, name: Arc<str>, holder: Arc<str>) -> Closing {
        Box::pin(async move {
            let proto = P::for_name(name);
            proto.release(&cx, &holder, Release::All).await.map(|_| ())
        })
    }
}

/// Records the wins of one lock-family acquire as holds.
struct HoldKeeper<P: Family> {
    cx: Arc<Ctx>,
    proto: Arc<P>,
    key: HoldKey,
    holder: Arc<str>,
    lease: Option<Duration>,
}

impl<P: Family> Keeper<P::Won> for HoldKeeper<P> {
    fn keep(&self, _won: &P::Won, sent: Instant) -> bool {
        let acquired = Acquired {
            holder: self.holder.clone(),
            kind: P::KIND,
            releaser: ByName::<P>::RELEASER,
            lease: self.lease,
            sent,
        };
        self.cx.holds.acquired(self.key.clone(), acquired)
    }

    fn recorded(&self) -> usize {
        self.cx.holds.count(&self.key)
    }

    fn lease_after(&self) -> Duration {
        self.cx.holds.current_lease(&self.key)
    }

    fn unkeep(self: Arc<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let holds = &self.cx.holds;
            let lease = holds.lease_after_release(&self.key);
            holds.begin_release(&self.key);
            let _ = self
                .proto
                .clone()
                .give_back(self.cx.clone(), self.holder.clone(), lease)
                .await;
            holds.end_release(&self.key);
            holds.released(&self.key, false);
        })
    }
}

/// The generic lock of the family over one protocol (Redisson's `RedissonBaseLock`).
pub(crate) struct LockCore<P: Family> {
    pub(crate) client: Client,
    pub(crate) proto: Arc<P>,
}

impl<P: Family> LockCore<P> {
    pub(crate) fn new(client: Client, proto: P) -> Arc<Self> {
        Arc::new(LockCore {
            client,
            proto: Arc::new(proto),
        })
    }

    pub(crate) fn name(&self) -> &str {
        self.proto.shown_name()
    }

    async fn cx(&self) -> Result<Arc<Ctx>> {
        self.client
            .state()
            .await
            .map_err(|e| e.with_lock(self.name()))
    }

    fn key(&self, owner: Owner) -> HoldKey {
        HoldKey::of_owner(self.proto.name().clone(), owner, self.proto.suffix())
    }

    /// Acquires for `owner`; `Ok(None)` when the wait limit passed.
    ///
    /// The public methods await this future (and [`release_as`](Self::release_as)'s) boxed: its
    /// state is most of a kilobyte, and left inline it made every task a caller spawns around an
    /// acquire more than 1 KB, past the size glibc's per-thread cache recycles. Freed between the
    /// small allocations a hold keeps, those tasks left about a kilobyte of unusable holes per
    /// lock held (10,000 locks acquired from spawned tasks: RSS +1.8 KB per lock, boxed +0.8 KB).
    pub(crate) async fn acquire_as(
        &self,
        owner: Owner,
        options: &AcquireOptions,
    ) -> Result<Option<P::Won>> {
        let start = Instant::now();
        let telemetry = self.client.options().telemetry.as_ref();
        let object = ObjectType::from(P::KIND);
        telemetry::measured(telemetry, object, self.name(), start, async {
            self.acquire_from(start, owner, options).await
        })
        .await
    }

    /// [`acquire_as`](Self::acquire_as), unmeasured, for a call made at `start`.
    async fn acquire_from(
        &self,
        start: Instant,
        owner: Owner,
        options: &AcquireOptions,
    ) -> Result<Option<P::Won>> {
        options.validate(self.name())?;
        // Connecting (first use, after a fork) counts against the wait limit too.
        let deadline = options
            .wait
            .filter(|w| !w.is_zero())
            .and_then(|w| start.checked_add(w));
        // Redis out of reach at the deadline, before any attempt: an outage, not a busy lock.
        let unreached = |cx: Option<&Ctx>, last: Option<String>| {
            let holder = format!("{}{}", self.client.holder(owner), self.proto.suffix());
            let reached = wait::Reached {
                answered: false,
                last,
            };
            match cx {
                Some(cx) => {
                    wait::outage_error(cx, self.name(), &holder, options.wait, start, reached)
                }
                None => Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "'{}' was not acquired: connecting to Redis did not finish within the \
                         wait limit; check that the server is up and reachable, then retry",
                        self.name()
                    ),
                )
                .with_lock(self.name())
                .with_holder(holder)
                .with_waited(start.elapsed())
                .settled()
                .at_deadline(),
            }
        };
        let cx = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), self.cx()).await {
                Ok(cx) => cx?,
                Err(_) => return Err(unreached(None, None)),
            },
            None => self.cx().await?,
        };
        // What this client's callers left of this lock is cleaned up first: a read hold being
        // given back must not refuse this owner's write lock, here or in Redis. A single try
        // waits for them at most the response timeout.
        let single_by =
            (options.wait == Some(Duration::ZERO)).then(|| start + cx.response_timeout());
        if cx.settling.any()
            && !Box::pin(wait::after_clean_ups(
                &cx,
                self.name(),
                deadline.or(single_by),
                options.cancel.as_ref(),
            ))
            .await
        {
            // The clean-ups of earlier calls are still running: an outage when they wait for a
            // Redis that is down, else the lock is busy with this client's own give-back.
            if !cx.conn.is_down() {
                return Ok(None);
            }
            return Err(unreached(
                Some(&cx),
                Some("an earlier call's clean-up is still waiting for Redis".to_owned()),
            ));
        }
        self.proto.precheck(&cx, owner).map_err(|e| {
            e.with_lock(self.name())
                .with_holder(&*cx.holder(owner, self.proto.suffix()))
        })?;
        let holder = cx.holder(owner, self.proto.suffix());
        let keeper = Arc::new(HoldKeeper {
            cx: cx.clone(),
            proto: self.proto.clone(),
            key: self.key(owner),
            holder: holder.clone(),
            lease: options.lease,
        });
        let request = Request::new(
            holder,
            options.lease.unwrap_or(cx.watchdog_timeout),
            options.wait,
        );
        let outcome = wait::acquire(wait::Acquire {
            cx,
            proto: self.proto.clone(),
            keeper,
            request,
            cancel: options.cancel.clone(),
            start,
        })
        .await?;
        Ok(match outcome {
            Outcome::Won(won) => Some(won),
            Outcome::TimedOut => None,
        })
    }

    /// Releases one hold of `owner`; `Ok(true)` when that fully released the lock.
    ///
    /// Bounded by the response timeout as a whole (a reply lost to a dropped connection is
    /// retried inside it). Once asked for, a release completes even if the caller's future is
    /// dropped midway: a guard then settles it in the background. In a `crosslock.release` span
    /// with `SpanLevel::All` (see [`crate::telemetry::spans`]).
    pub(crate) async fn release_as(self: &Arc<Self>, owner: Owner) -> Result<bool> {
        let telemetry = self.client.options().telemetry.as_ref();
        let object = ObjectType::from(P::KIND);
        let release = self.release_untraced(owner);
        telemetry::spans::release(telemetry, object, self.name(), release).await
    }

    /// [`LockCore::release_as`] without its span.
    async fn release_untraced(self: &Arc<Self>, owner: Owner) -> Result<bool> {
        let cx = self.cx().await?;
        let key = self.key(owner);
        if cx.holds.is_lost(&key) {
            return Err(self.release_lost(&cx, key));
        }
        let before = cx.holds.count(&key);
        // A hold whose deadline passed is lost from now on, whatever Redis answers (the caller
        // may have been paused past it): marked before the release is in flight, so that the
        // release reports the loss and the signal has fired by the time it returns.
        let _ = cx.holds.is_lost(&key);
        cx.holds.begin_release(&key);
        let mut settle = Settle {
            lock: self.clone(),
            cx: cx.clone(),
            key: key.clone(),
            before,
            armed: true,
        };
        let bound = cx.response_timeout();
        let last = Mutex::new(None);
        let released = self.release_with(&cx, &key, None, Some(&last));
        let result = match tokio::time::timeout(bound, released).await {
            Ok(result) => result,
            Err(_) => {
                // No answer in time: whatever happened in Redis, this hold is over for us (stop
                // renewing it, as Redisson does on any unlock outcome), so at worst it expires
                // after its lease.
                cx.holds.released(&key, false);
                let holder = cx.holder(owner, self.proto.suffix());
                let last = lock(&last).take();
                Err(match last {
                    // Tried and failed for want of Redis (a refused connection, a dropped one):
                    // say what happened, not that Redis was slow.
                    Some(why) => Error::new(
                        ErrorKind::Unavailable,
                        format!(
                            "the release of lock '{}' did not get through within the response \
                             timeout ({:.3}s): {why}. It is no longer renewed, so at worst it \
                             expires after its lease",
                            self.name(),
                            bound.as_secs_f64()
                        ),
                    )
                    .with_lock(self.name()),
                    None => Error::no_answer(Some(self.name()), bound),
                }
                .with_holder(&*holder))
            }
        };
        settle.armed = false;
        cx.holds.end_release(&key);
        result
    }

    /// The release of a hold already known lost: the caller hears so at once, whether or not
    /// Redis answers; the release script still runs, in the background and bounded, as a
    /// clean-up (on a lock another holder took meanwhile it changes nothing).
    fn release_lost(self: &Arc<Self>, cx: &Arc<Ctx>, key: HoldKey) -> Error {
        let holder = cx.holder(key.owner().expect(FAMILY_KEY), self.proto.suffix());
        let before = cx.holds.count(&key).max(1);
        let lease_after = cx.holds.lease_after_release(&key);
        let on_watchdog = cx.holds.on_watchdog(&key);
        // The clean-up is registered before the hold is forgotten: this client's next acquire of
        // the lock waits for it, so the unlock below cannot meet a fresh hold of the same owner.
        let running = cx.settling.begin(self.name());
        cx.holds.forget_lost(&key);
        let (lock, cx, script_holder) = (self.clone(), cx.clone(), holder.clone());
        runtime::spawn(async move {
            let _running = running;
            let bound = cx.outage_tolerance + cx.response_timeout();
            let clean = async {
                let mut pause = RetryPause::new();
                loop {
                    let reply = lock
                        .proto
                        .release(&cx, &script_holder, Release::one(lease_after, Some(before)))
                        .await;
                    if !reply.as_ref().is_err_and(Error::is_unavailable) {
                        return;
                    }
                    pause.sleep().await;
                }
            };
            tokio::select! {
                _ = tokio::time::timeout(bound, clean) => {}
                () = cx.stop.cancelled() => {}
            }
        });
        self.lost_error(&holder, on_watchdog)
    }

    /// The [`ErrorKind::LockLost`] error of a release by `holder` of a hold that was lost;
    /// `on_watchdog`: the hold was renewed by the watchdog (a longer lease would not help).
    fn lost_error(&self, holder: &str, on_watchdog: bool) -> Error {
        let advice = if on_watchdog {
            "The watchdog was renewing it, so it was force-unlocked or deleted, or no renewal \
             reached Redis for a whole watchdog timeout (a partition, a paused process): find \
             who force-unlocks it, and watch the lost-lock signal"
        } else {
            "Use a longer lease, or the watchdog, and watch the lost-lock signal"
        };
        Error::new(
            ErrorKind::LockLost,
            format!(
                "lock '{}' was lost before {holder} released it: it expired (its lease ran \
                 out without a confirmed renewal) or was force-unlocked, so work done since \
                 may have overlapped another holder. {advice}",
                self.name()
            ),
        )
        .with_lock(self.name())
        .with_holder(holder)
    }

    /// Runs the release for `key`; `retry_of` is the hold count before an earlier attempt whose
    /// reply was lost.
    /// `last` is told the message of each attempt that failed for want of Redis.
    async fn release_with(
        &self,
        cx: &Ctx,
        key: &HoldKey,
        retry_of: Option<usize>,
        last: Option<&Mutex<Option<String>>>,
    ) -> Result<bool> {
        let note = |reply: &Result<Option<bool>>| {
            if let (Some(last), Err(e)) = (last, reply) {
                *lock(last) = Some(e.message().to_owned());
            }
        };
        let holder = cx.holder(key.owner().expect(FAMILY_KEY), self.proto.suffix());
        let was_lost = cx.holds.is_lost(key);
        let on_watchdog = cx.holds.on_watchdog(key);
        let lease_after = cx.holds.lease_after_release(key);
        let mut sent = Instant::now();
        let mut reply = self
            .proto
            .release(cx, &holder, Release::one(lease_after, retry_of))
            .await;
        if reply.as_ref().is_err_and(Error::is_unavailable) {
            note(&reply);
            // The reply was lost; the release may or may not have happened. Retry (with
            // back-off; the caller bounds the whole) telling the script how many holds we had,
            // so a release that did happen is not applied twice. Boxed: rare, and kept out of
            // the state of every release.
            let before = retry_of.unwrap_or_else(|| cx.holds.count(key)).max(1);
            (reply, sent) = Box::pin(async {
                let mut pause = RetryPause::new();
                loop {
                    pause.sleep().await;
                    let sent = Instant::now();
                    let reply = self
                        .proto
                        .release(cx, &holder, Release::one(lease_after, Some(before)))
                        .await;
                    if !reply.as_ref().is_err_and(Error::is_unavailable) {
                        return (reply, sent);
                    }
                    note(&reply);
                }
            })
            .await;
        }
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // Redis refused (out of memory, wrong type): nothing changed there, so nothing
                // changes here either; the hold stays, renewed as before.
                return Err(e.with_holder(&*holder));
            }
        };
        match reply {
            Some(fully) if !was_lost => {
                if !fully {
                    cx.holds.confirm(key, None, sent, lease_after);
                }
                cx.holds.released(key, fully);
                Ok(fully)
            }
            Some(_) | None if was_lost || cx.holds.forget_lost(key) => {
                cx.holds.forget_lost(key);
                Err(self.lost_error(&holder, on_watchdog))
            }
            _ => {
                let current = Box::pin(self.holders_in(cx)).await.unwrap_or_default();
                let held_by = if current.is_empty() {
                    "it is not locked".to_owned()
                } else {
                    format!("it is held by {}", self.holders_shown(&current))
                };
                Err(Error::new(
                    ErrorKind::NotHeld,
                    format!(
                        "cannot release lock '{}': {holder} does not hold it ({held_by}); release \
                         only what this owner acquired",
                        self.name()
                    ),
                )
                .with_lock(self.name())
                .with_holder(&*holder))
            }
        }
    }

    /// Sets the lease of the hold of `owner` to `lease` from now (see the lock types' `extend_as`).
    pub(crate) async fn extend_as(&self, owner: Owner, lease: Duration) -> Result<()> {
        check_extend_lease(self.name(), lease)?;
        let cx = self.cx().await?;
        let key = self.key(owner);
        let holder = cx.holder(owner, self.proto.suffix());
        let lost = || {
            Error::new(
                ErrorKind::LockLost,
                format!(
                    "cannot extend lock '{}': it was lost before {holder} extended it (it expired, \
                     its lease having run out without a confirmed renewal, or was \
                     force-unlocked), so work done since may have overlapped another holder; \
                     acquire it again",
                    self.name()
                ),
            )
            .with_lock(self.name())
            .with_holder(&*holder)
        };
        let Some(tenure) = cx.holds.tenure_of(&key) else {
            let current = Box::pin(self.holders_in(&cx)).await.unwrap_or_default();
            let held_by = if current.is_empty() {
                "it is not locked".to_owned()
            } else {
                format!("it is held by {}", current.join(", "))
            };
            return Err(Error::new(
                ErrorKind::NotHeld,
                format!(
                    "cannot extend lock '{}': {holder} does not hold it ({held_by}); extend only \
                     what this owner holds",
                    self.name()
                ),
            )
            .with_lock(self.name())
            .with_holder(&*holder));
        };
        // Decided from the clock first: a hold whose deadline passed stays lost, whatever Redis
        // says now (someone else may have held it in between).
        if cx.holds.is_lost(&key) {
            return Err(lost());
        }
        let sent = Instant::now();
        cx.holds.extending(&key, tenure, sent, lease);
        let name = self.proto.name();
        let reply: i64 = match P::renew_kind(name) {
            RenewKind::Group { key, fields } => {
                cx.conn
                    .eval(
                        &crate::scripts::GROUP_EXTEND,
                        &[&*key],
                        &[
                            &crate::util::ms(lease),
                            &super::epoch_ms(),
                            &&*holder,
                            &&*fields,
                        ],
                        Some(&*key),
                    )
                    .await
            }
            RenewKind::Read { prefix } => {
                cx.conn
                    .eval(
                        &crate::scripts::READ_EXTEND,
                        &[name],
                        &[&crate::util::ms(lease), &&*holder, &&*prefix],
                        Some(&**name),
                    )
                    .await
            }
            _ => {
                cx.conn
                    .eval(
                        &crate::scripts::LOCK_EXTEND,
                        &[name],
                        &[&crate::util::ms(lease), &&*holder],
                        Some(&**name),
                    )
                    .await
            }
        }
        .map_err(|e| e.with_lock(self.name()).with_holder(&*holder))?;
        if reply == 1 && cx.holds.extended(&key, tenure, sent, lease) {
            return Ok(());
        }
        if reply != 1
            && let Some(event) = cx.holds.mark_lost(&key, tenure, LostReason::Gone)
        {
            cx.holds.report_later(event);
        }
        Err(lost())
    }

    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        let cx = self.cx().await?;
        self.proto.force_unlock(&cx).await
    }

    async fn info(&self, owner: Option<Owner>) -> Result<Info> {
        let cx = self.cx().await?;
        let holder = owner
            .map(|o| cx.holder(o, self.proto.suffix()))
            .unwrap_or_else(|| Arc::from(""));
        self.proto.info(&cx, &holder).await
    }

    async fn holders_in(&self, cx: &Ctx) -> Result<Vec<String>> {
        Ok(self.proto.info(cx, "").await?.holders)
    }

    pub(crate) async fn is_locked(&self) -> Result<bool> {
        Ok(self.info(None).await?.locked)
    }

    pub(crate) async fn hold_count_of(&self, owner: Owner) -> Result<u32> {
        Ok(self.info(Some(owner)).await?.count)
    }

    pub(crate) async fn remaining_lease(&self) -> Result<Option<Duration>> {
        let info = self.info(None).await?;
        Ok(match info.pttl {
            _ if !info.locked => None,
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0) as u64)),
        })
    }

    pub(crate) async fn holders_now(&self) -> Result<Vec<String>> {
        Ok(self.info(None).await?.holders)
    }

    pub(crate) fn lost_token(&self, owner: Owner) -> Option<CancellationToken> {
        let cx = self.client.state_now()?;
        let key = self.key(owner);
        // Handed out cancelled if the deadline has passed already.
        let _ = cx.holds.is_lost(&key);
        cx.holds.token(&key)
    }

    pub(crate) fn is_lost(&self, owner: Owner) -> bool {
        self.client
            .state_now()
            .is_some_and(|cx| cx.holds.is_lost(&self.key(owner)))
    }

    /// Holder strings for an error text: a holder of this very client is marked so (known
    /// without asking Redis); the process behind another one is `inspect`'s to find (it costs
    /// a `CLIENT LIST`, which an error path does not wait for).
    fn holders_shown(&self, holders: &[String]) -> String {
        let own = self.client.id();
        holders
            .iter()
            .map(|h| {
                if h.split(':').next() == Some(own.as_str()) {
                    format!("{h} (this client, pid {})", crate::runtime::pid())
                } else {
                    h.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(crate) async fn timeout_error(&self, owner: Owner, waited: Duration) -> Error {
        let holder = format!("{}{}", self.client.holder(owner), self.proto.suffix());
        // Best effort and bounded: Redis may be the reason we timed out.
        let held_by =
            match tokio::time::timeout(Duration::from_millis(200), self.holders_now()).await {
                Ok(Ok(h)) if !h.is_empty() => format!(", held by {}", self.holders_shown(&h)),
                _ => String::new(),
            };
        Error::new(
            ErrorKind::Timeout,
            format!(
                "gave up waiting for {} '{}' after {:.3}s{held_by}; retry later or allow a longer \
                 wait",
                P::KIND.phrase(),
                self.name(),
                waited.as_secs_f64()
            ),
        )
        .with_lock(self.name())
        .with_holder(holder)
        .with_waited(waited)
    }
}

impl<P: Family> fmt::Debug for LockCore<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(P::KIND.type_name())
            .field("name", &self.name())
            .finish()
    }
}

/// Finishes a release whose caller left before it completed (see [`LockCore::release_as`]).
struct Settle<P: Family> {
    lock: Arc<LockCore<P>>,
    cx: Arc<Ctx>,
    key: HoldKey,
    before: usize,
    armed: bool,
}

impl<P: Family> Drop for Settle<P> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (lock, cx, key, before) = (
            self.lock.clone(),
            self.cx.clone(),
            self.key.clone(),
            self.before,
        );
        let running = cx.settling.begin(lock.name());
        runtime::spawn(async move {
            let _running = running;
            let bound = cx.response_timeout();
            if tokio::time::timeout(
                bound,
                lock.release_with(&cx, &key, Some(before.max(1)), None),
            )
            .await
            .is_err()
            {
                cx.holds.released(&key, false);
            }
            cx.holds.end_release(&key);
        });
    }
}
