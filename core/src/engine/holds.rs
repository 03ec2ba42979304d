//! What this client holds: every lock-family hold and every permit, keyed by the object's name
//! and whose hold it is (an owner, or a permit's id).
//!
//! A hold is recorded by a successful acquire and popped by each release. It knows how it is
//! renewed and released (its [`Releaser`]), which tenure it is, and until when its lease was last
//! confirmed: the local deadline at which the holder is told the lock may be lost if no renewal
//! confirmed it meanwhile (see [`renewal`](super::renewal)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use futures_util::future::BoxFuture;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::kinds::LockKind;
use crate::owner::Owner;
use crate::session::Ctx;
use crate::util::lock;

use super::clock_drift;
use super::lost::{LostListener, LostLock, LostReason};
use crate::telemetry::{Event, HoldEnd, ObjectType, Telemetry};

/// How a hold is renewed by the watchdog (made per renewal round from the hold's name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum RenewKind {
    /// `HEXISTS name holder` → `PEXPIRE name lease` (RLock, fair, spin, fenced, write).
    Hash,
    /// The reader's `rwlock_timeout` keys and the hash (§4.6); `prefix` is the timeout-key prefix
    /// before `:<holder>` (`{name}`, or the raw name when it contains `{`).
    Read { prefix: Arc<str> },
    /// A permit's expiry in the semaphore's `timeouts` sorted set (the holder is the permit id).
    Permit { timeouts: Arc<str> },
    /// A group lock's fields in the group's hash: `key` is the hash, `fields` the hold's fields,
    /// comma-separated (Base64 has no comma).
    Group { key: Arc<str>, fields: Arc<str> },
}

impl RenewKind {
    /// How many variants [`index`](Self::index) numbers.
    pub(crate) const COUNT: usize = 4;

    /// A small number per variant (the renewal groups holds by it), below [`COUNT`](Self::COUNT).
    pub(crate) fn index(&self) -> usize {
        match self {
            RenewKind::Hash => 0,
            RenewKind::Read { .. } => 1,
            RenewKind::Permit { .. } => 2,
            RenewKind::Group { .. } => 3,
        }
    }
}

/// How to renew and release-all one hold, whatever its type (for the renewal loop and `close()`),
/// from the hold's name: one static value per type of hold, so a hold keeps no object of its own
/// for this.
pub(crate) trait Releaser: Send + Sync + 'static {
    /// How a hold of the object named `name` is renewed.
    fn renew_kind(&self, name: &Arc<str>) -> RenewKind;
    /// Drops every hold of `holder` on the object named `name` at once (the client is closing).
    fn release_on_close(&self, cx: Arc<Ctx>, name: Arc<str>, holder: Arc<str>) -> Closing;
}

/// A [`Releaser::release_on_close`] under way.
pub(crate) type Closing = BoxFuture<'static, Result<()>>;

/// A hold taken away by [`Holds::drain`]: what releasing it takes.
pub(crate) struct Drained {
    pub(crate) holder: Arc<str>,
    /// The lock's name (on a cluster, its slot tells which master the release goes to).
    pub(crate) name: Arc<str>,
    pub(crate) releaser: &'static dyn Releaser,
}

/// What a lock-family holder string has after `<client-id>:<owner>`: one byte in every such hold's
/// key rather than a `&'static str`'s two words (a key is 32 bytes instead of 40, in every slot of
/// the hold table and every renewal window).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub(crate) enum Suffix {
    /// Nothing: every lock but the write lock.
    #[default]
    None,
    /// `:write`, the write lock's.
    Write,
}

impl Suffix {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Suffix::None => "",
            Suffix::Write => ":write",
        }
    }
}

impl std::fmt::Display for Suffix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A permit's id as its hold's key has it: the number its 32 hex characters spell, behind one
/// pointer, so that a key stays 32 bytes (inline, the id's 16 bytes would make every key 40,
/// a lock's too).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct PermitId(Arc<u128>);

impl PermitId {
    /// The id `text` spells: 32 hex characters, in either case (as a permit-expirable semaphore
    /// makes and checks ids); `None` for any other text.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(text, 16)
            .ok()
            .map(|id| PermitId(Arc::new(id)))
    }
}

impl std::fmt::Display for PermitId {
    /// The 32 lowercase hex characters of the id, as the semaphore spells it (its holder string).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", *self.0)
    }
}

/// Whose hold a [`HoldKey`] names, which also spells the hold's holder string.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum HeldBy {
    /// A lock-family hold: its owner, and what its holder string `<client-id>:<owner><suffix>`
    /// has after the owner.
    Owner(Owner, Suffix),
    /// A permit of a permit-expirable semaphore: its id, which is its holder string.
    Permit(PermitId),
}

/// The key of a hold: the object's name, and whose hold it is.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct HoldKey {
    pub(crate) name: Arc<str>,
    pub(crate) by: HeldBy,
}

impl HoldKey {
    /// The key of `owner`'s hold of the lock named `name`, whose holder strings end in `suffix`.
    pub(crate) fn of_owner(name: Arc<str>, owner: Owner, suffix: Suffix) -> Self {
        HoldKey {
            name,
            by: HeldBy::Owner(owner, suffix),
        }
    }

    /// The key of the permit `id` of the semaphore named `name`.
    pub(crate) fn of_permit(name: Arc<str>, id: PermitId) -> Self {
        HoldKey {
            name,
            by: HeldBy::Permit(id),
        }
    }

    /// The owner of a lock-family hold; `None` for a permit, which belongs to nobody (its loss
    /// is reported with no [`LostLock::owner`], its id as the holder).
    pub(crate) fn owner(&self) -> Option<Owner> {
        match &self.by {
            HeldBy::Owner(owner, _) => Some(*owner),
            HeldBy::Permit(_) => None,
        }
    }
}

/// One hold: 88 bytes, kept small since a process may hold tens of thousands (the two times as
/// nanoseconds since the table's epoch rather than `Instant`s, re-entrant leases behind one
/// pointer, the lost flag beside the other small fields: 144 bytes before, 48 more per hold in
/// glibc's size classes). `hold_stays_small` keeps it so.
struct Hold {
    /// One entry per acquire still in force, innermost last: `None` for a watchdog hold,
    /// `Some(lease)` for a hold with an explicit lease.
    leases: Leases,
    /// Found lost (and not released since).
    lost: bool,
    /// The token handed out for the lost-lock signal, made only when someone asks for it (a
    /// guard's `lost_token`, a multi-lock): a token per hold cost an allocation per acquire and
    /// about 150 bytes per held lock.
    lost_token: Option<CancellationToken>,
    kind: LockKind,
    releaser: &'static dyn Releaser,
    /// Which tenure this is: a hold released and taken again is a new tenure, so a renewal that
    /// ran in the gap between the two is not mistaken for a loss of the new one. It is also when
    /// the tenure began ([`Holds::at`] of its winning attempt's send, moved on a nanosecond where
    /// two tenures began at once: [`Holds::new_tenure`]), which telemetry's hold time counts from.
    tenure: u64,
    /// Releases of this hold in flight: a renewal that finds the lock gone meanwhile saw our own
    /// release, not a loss.
    releasing: u32,
    /// The last renewal round that took this hold into one of its windows (0: none yet).
    round: u32,
    /// When the last confirmed operation that set the lock's lease was sent ([`Holds::at`]).
    confirmed_sent: u64,
    /// When that lease runs out, less the clock-drift margin ([`Holds::at`]): the lost-lock
    /// signal fires then unless a later confirmation moves it.
    deadline: u64,
}

/// The leases of a hold's acquires, innermost last: the first inline (nearly every hold has
/// exactly one), re-entrant ones after it on the heap. A `Vec` for every hold cost an allocation
/// per acquire and about 80 bytes per held lock.
#[derive(Default)]
struct Leases {
    first: Option<Option<Duration>>,
    /// Boxed: one pointer in every hold instead of a `Vec`'s three words (the extra allocation
    /// is paid by re-entrant acquires alone).
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<Option<Duration>>>>,
}

impl Leases {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.as_ref().map_or(0, |more| more.len())
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn push(&mut self, lease: Option<Duration>) {
        if self.first.is_none() {
            self.first = Some(lease);
        } else {
            self.more.get_or_insert_default().push(lease);
        }
    }

    fn pop(&mut self) {
        match self.more.as_mut() {
            Some(more) if !more.is_empty() => {
                more.pop();
                if more.is_empty() {
                    self.more = None;
                }
            }
            _ => self.first = None,
        }
    }

    fn clear(&mut self) {
        *self = Leases::default();
    }

    /// Makes every acquire of the hold one with `lease` (an extended hold is no watchdog hold).
    fn set_all(&mut self, lease: Duration) {
        if let Some(first) = self.first.as_mut() {
            *first = Some(lease);
        }
        if let Some(more) = self.more.as_mut() {
            more.iter_mut().for_each(|l| *l = Some(lease));
        }
    }

    /// The lease of the `i`th acquire, outermost first.
    fn get(&self, i: usize) -> Option<Option<Duration>> {
        match i {
            0 => self.first,
            _ => self.more.as_ref()?.get(i - 1).copied(),
        }
    }

    fn last(&self) -> Option<Option<Duration>> {
        self.more
            .as_ref()
            .and_then(|more| more.last().copied())
            .or(self.first)
    }

    fn iter(&self) -> impl Iterator<Item = &Option<Duration>> {
        self.first
            .iter()
            .chain(self.more.iter().flat_map(|more| more.iter()))
    }
}

impl Hold {
    fn watched(&self) -> bool {
        self.leases.iter().any(Option::is_none)
    }

    /// `sent` as [`Holds::at`] has it.
    fn confirm(&mut self, sent: u64, lease: Duration) {
        if sent >= self.confirmed_sent {
            self.confirmed_sent = sent;
            self.deadline = sent.saturating_add(nanos(lease.saturating_sub(clock_drift(lease))));
        }
    }

    fn mark_lost(&mut self) {
        self.lost = true;
        if let Some(token) = &self.lost_token {
            token.cancel();
        }
    }

    fn lost_token(&mut self) -> CancellationToken {
        let lost = self.lost;
        self.lost_token
            .get_or_insert_with(|| {
                let token = CancellationToken::new();
                if lost {
                    token.cancel();
                }
                token
            })
            .clone()
    }
}

/// One watched hold, as the renewal loop sees it.
pub(crate) struct Watched {
    pub(crate) key: HoldKey,
    pub(crate) tenure: u64,
    pub(crate) renew: RenewKind,
}

/// The holds of one client.
pub(crate) struct Holds {
    /// The client's id, the first part of its holder strings.
    client_id: Arc<str>,
    /// What a hold's times count from ([`Holds::at`]): made before the client's first call.
    epoch: Instant,
    /// Holds are boxed so that a slot of the table is a key and a pointer: its spare capacity
    /// (up to half the slots) and the old tables each doubling frees then cost little per hold.
    map: Mutex<HashMap<HoldKey, Box<Hold>>>,
    /// Set (under `map`'s lock) when the client closes: no new hold may be recorded after.
    closed: AtomicBool,
    /// The last tenure begun ([`Holds::new_tenure`]).
    last_tenure: AtomicU64,
    /// Notified when a hold appears that the renewal loop's current sleep does not cover.
    pub(crate) changed: Notify,
    /// How the renewal loop last went to sleep (always taken after `map`).
    plan: Mutex<Plan>,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) batch: usize,
    /// The client's lost-lock listener ([`Client::on_lock_lost`](crate::Client::on_lock_lost)),
    /// told of a loss found on a read ([`Holds::is_lost`]) as of one the renewal loop finds.
    listener: Arc<ArcSwapOption<LostListener>>,
    /// Told when a hold begins and ends ([`ClientOptions::telemetry`](crate::ClientOptions::telemetry)).
    telemetry: Option<Telemetry>,
}

/// `duration` in nanoseconds, at most `u64::MAX` (584 years: the deadline of a longer lease, which
/// may be up to 2^53-1 ms, stops there, and comes no sooner for it).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// How the renewal loop sleeps: until `at` (or until notified, if `None`), and whether it is
/// already counting periods for watched holds. An acquire wakes it only when the new hold needs it
/// earlier than that, so a burst of acquires costs the loop nothing (each wake-up scans every
/// hold, which made acquiring N locks O(N²)).
#[derive(Clone, Copy, Default)]
struct Plan {
    at: Option<Instant>,
    watching: bool,
}

/// What recording an acquire needs besides the key.
pub(crate) struct Acquired {
    pub(crate) holder: Arc<str>,
    pub(crate) kind: LockKind,
    pub(crate) releaser: &'static dyn Releaser,
    pub(crate) lease: Option<Duration>,
    /// When the winning attempt was sent.
    pub(crate) sent: Instant,
}

impl Holds {
    pub(crate) fn new(
        client_id: &str,
        watchdog_timeout: Duration,
        batch: usize,
        listener: Arc<ArcSwapOption<LostListener>>,
        telemetry: Option<Telemetry>,
    ) -> Arc<Self> {
        Arc::new(Holds {
            client_id: Arc::from(client_id),
            epoch: Instant::now(),
            map: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            last_tenure: AtomicU64::new(0),
            changed: Notify::new(),
            plan: Mutex::new(Plan::default()),
            watchdog_timeout,
            batch: batch.max(1),
            listener,
            telemetry,
        })
    }

    /// A new tenure begun at `at` ([`Holds::at`]): `at`, or one more than the last tenure begun
    /// if that is not before it, so that no two tenures are alike.
    fn new_tenure(&self, at: u64) -> u64 {
        let mut last = self.last_tenure.load(Ordering::Relaxed);
        loop {
            let tenure = at.max(last.saturating_add(1));
            match self.last_tenure.compare_exchange_weak(
                last,
                tenure,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return tenure,
                Err(now) => last = now,
            }
        }
    }

    /// What the client tells what it measures (none without [`ClientOptions::telemetry`](crate::ClientOptions::telemetry)).
    pub(crate) fn telemetry(&self) -> Option<&Telemetry> {
        self.telemetry.as_ref()
    }

    /// Tells telemetry (if any) that the hold `hold` keyed `key` began.
    fn began(&self, key: &HoldKey, hold: &Hold) {
        if let Some(telemetry) = &self.telemetry {
            telemetry.record(&Event::HoldBegan {
                object: ObjectType::from(hold.kind),
                name: &key.name,
            });
        }
    }

    /// Tells telemetry (if any) that the hold `hold` keyed `key`, not lost before, ended `end`.
    fn ended(&self, key: &HoldKey, hold: &Hold, end: HoldEnd) {
        if let Some(telemetry) = &self.telemetry {
            let now = self.at(Instant::now());
            telemetry.record(&Event::HoldEnded {
                object: ObjectType::from(hold.kind),
                name: &key.name,
                held: Duration::from_nanos(now.saturating_sub(hold.tenure)),
                end,
            });
        }
    }

    /// `instant` as a hold keeps it: nanoseconds since the table's epoch (an instant before it,
    /// which no call of this client's sends, counts as the epoch).
    fn at(&self, instant: Instant) -> u64 {
        nanos(instant.saturating_duration_since(self.epoch))
    }

    /// The instant a hold's time stands for.
    fn instant(&self, at: u64) -> Instant {
        self.epoch + Duration::from_nanos(at)
    }

    /// Records one acquire; `false` when the client has closed meanwhile (the caller must give
    /// the lock back).
    pub(crate) fn acquired(&self, key: HoldKey, acquired: Acquired) -> bool {
        let mut map = lock(&self.map);
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let lease = acquired.lease.unwrap_or(self.watchdog_timeout);
        let sent = self.at(acquired.sent);
        debug_assert_eq!(
            *acquired.holder,
            *self.holder(&key),
            "a holder string is the key's: <client-id>:<owner><suffix>, or a permit's id"
        );
        // A re-entry sent after the hold's deadline had passed unnoticed (a paused process that
        // re-enters before anything read `is_lost`) does not carry the old tenure on: that one
        // is lost as a read would have found it (token, listener), and this acquire begins anew.
        let mut overdue = None;
        if let Some(hold) = map.get_mut(&key)
            && !hold.leases.is_empty()
            && !hold.lost
            && hold.releasing == 0
            && hold.deadline <= sent
        {
            hold.mark_lost();
            overdue = Some(self.event(&key, hold, LostReason::Expired));
        }
        let mut began = false;
        // The key again for telemetry's event (the entry takes it): a clone only where told.
        let told = self.telemetry.is_some().then(|| key.clone());
        let hold = map.entry(key).or_insert_with(|| {
            began = true;
            Box::new(Hold {
                leases: Leases::default(),
                lost: false,
                lost_token: None,
                kind: acquired.kind,
                releaser: acquired.releaser,
                tenure: self.new_tenure(sent),
                releasing: 0,
                round: 0,
                confirmed_sent: sent,
                deadline: sent,
            })
        });
        if hold.lost {
            // Re-acquired after a loss: a new tenure with a fresh token.
            hold.leases.clear();
            hold.lost = false;
            hold.lost_token = None;
            hold.tenure = self.new_tenure(sent);
            hold.confirmed_sent = sent;
            began = true;
        }
        if began && let Some(key) = &told {
            self.began(key, hold);
        }
        hold.leases.push(acquired.lease);
        hold.confirm(sent, lease);
        let plan = *lock(&self.plan);
        let wake = (acquired.lease.is_none() && !plan.watching)
            || plan.at.is_none_or(|at| hold.deadline < self.at(at));
        drop(map);
        if let Some(event) = overdue {
            self.report_later(event);
        }
        if wake {
            self.changed.notify_one();
        }
        true
    }

    /// Notes that an operation sent at `sent` set the lock's lease to `lease` (a renewal, a
    /// re-entrant release) for the tenure `tenure` (any tenure if `None`).
    pub(crate) fn confirm(
        &self,
        key: &HoldKey,
        tenure: Option<u64>,
        sent: Instant,
        lease: Duration,
    ) {
        if let Some(hold) = lock(&self.map).get_mut(key)
            && tenure.is_none_or(|t| t == hold.tenure)
            && !hold.lost
        {
            hold.confirm(self.at(sent), lease);
        }
    }

    /// The tenure of the hold keyed `key`, if this client records it.
    pub(crate) fn tenure_of(&self, key: &HoldKey) -> Option<u64> {
        lock(&self.map).get(key).map(|h| h.tenure)
    }

    /// Notes that an extend of the tenure `tenure` of `key` to `lease` is sent at `sent`. Until
    /// its answer is known the hold's deadline is no later than that lease's end (Redis may have
    /// set it, also when the answer never comes or the caller stops waiting for it: a shorter
    /// lease must not leave this process believing in the longer one), and no renewal sent
    /// before it moves the deadline back.
    pub(crate) fn extending(&self, key: &HoldKey, tenure: u64, sent: Instant, lease: Duration) {
        let sent = self.at(sent);
        let mut map = lock(&self.map);
        let Some(hold) = map.get_mut(key) else {
            return;
        };
        if hold.tenure != tenure || hold.lost {
            return;
        }
        hold.confirmed_sent = hold.confirmed_sent.max(sent);
        let end = sent.saturating_add(nanos(lease.saturating_sub(clock_drift(lease))));
        let sooner = end < hold.deadline;
        hold.deadline = hold.deadline.min(end);
        drop(map);
        if sooner {
            // The renewal loop may sleep past the new deadline.
            self.changed.notify_one();
        }
    }

    /// Notes that an extend sent at `sent` set the lease of the tenure `tenure` of `key` to
    /// `lease`: every acquire of the hold becomes one with that lease (the watchdog stops
    /// renewing it), and its deadline is `lease` from `sent`, earlier or later than before.
    /// `false` when that tenure is not recorded any more, or was found lost meanwhile.
    pub(crate) fn extended(
        &self,
        key: &HoldKey,
        tenure: u64,
        sent: Instant,
        lease: Duration,
    ) -> bool {
        let sent = self.at(sent);
        let mut map = lock(&self.map);
        let Some(hold) = map.get_mut(key) else {
            return false;
        };
        if hold.tenure != tenure || hold.lost {
            return false;
        }
        hold.leases.set_all(lease);
        hold.confirmed_sent = hold.confirmed_sent.max(sent);
        hold.deadline = sent.saturating_add(nanos(lease.saturating_sub(clock_drift(lease))));
        drop(map);
        // The renewal loop may sleep until the old deadline, or count this hold as watched.
        self.changed.notify_one();
        true
    }

    /// Notes that a release of `key` is in flight (see [`Hold::releasing`]); pair with
    /// [`end_release`](Self::end_release).
    pub(crate) fn begin_release(&self, key: &HoldKey) {
        if let Some(hold) = lock(&self.map).get_mut(key) {
            hold.releasing += 1;
        }
    }

    /// Ends what [`begin_release`](Self::begin_release) began (a no-op if the hold is gone).
    pub(crate) fn end_release(&self, key: &HoldKey) {
        if let Some(hold) = lock(&self.map).get_mut(key) {
            hold.releasing = hold.releasing.saturating_sub(1);
        }
    }

    /// How many holds this process records for `key` (what Redis should count, too).
    pub(crate) fn count(&self, key: &HoldKey) -> usize {
        lock(&self.map).get(key).map_or(0, |h| h.leases.len())
    }

    /// Whether the innermost hold of `key` is renewed by the watchdog (taken without a lease);
    /// `false` when not held here.
    pub(crate) fn on_watchdog(&self, key: &HoldKey) -> bool {
        lock(&self.map)
            .get(key)
            .and_then(|h| h.leases.last())
            .is_some_and(|lease| lease.is_none())
    }

    /// The lease the lock should have now: that of the innermost hold, else the watchdog's.
    pub(crate) fn current_lease(&self, key: &HoldKey) -> Duration {
        lock(&self.map)
            .get(key)
            .and_then(|h| h.leases.last().flatten())
            .unwrap_or(self.watchdog_timeout)
    }

    /// The lease to keep on a lock when one re-entrant hold of it is released.
    pub(crate) fn lease_after_release(&self, key: &HoldKey) -> Duration {
        lock(&self.map)
            .get(key)
            .and_then(|h| {
                let n = h.leases.len();
                if n >= 2 {
                    h.leases.get(n - 2).flatten()
                } else {
                    None
                }
            })
            .unwrap_or(self.watchdog_timeout)
    }

    /// Pops one hold (the lock is still held re-entrantly) or all (`fully`).
    pub(crate) fn released(&self, key: &HoldKey, fully: bool) {
        let mut map = lock(&self.map);
        if let Some(hold) = map.get_mut(key) {
            hold.leases.pop();
            if fully || hold.leases.is_empty() {
                if !hold.lost {
                    self.ended(key, hold, HoldEnd::Released);
                }
                map.remove(key);
            }
        }
    }

    /// Marks a hold lost but keeps it, so a later release reports the loss rather than "not
    /// held". Only the tenure `tenure` is marked, and not while a release of it is in flight.
    /// Returns the event to report if it was that live hold.
    pub(crate) fn mark_lost(
        &self,
        key: &HoldKey,
        tenure: u64,
        reason: LostReason,
    ) -> Option<LostLock> {
        let mut map = lock(&self.map);
        let hold = map.get_mut(key)?;
        if hold.tenure != tenure || hold.releasing > 0 || hold.lost {
            return None;
        }
        hold.mark_lost();
        Some(self.event(key, hold, reason))
    }

    /// Marks lost every hold whose deadline is at or before `now`; returns their events.
    pub(crate) fn expire_due(&self, now: Instant) -> Vec<LostLock> {
        let now = self.at(now);
        let mut map = lock(&self.map);
        let mut out = Vec::new();
        for (key, hold) in map.iter_mut() {
            if hold.deadline <= now && hold.releasing == 0 && !hold.lost {
                hold.mark_lost();
                out.push(self.event(key, hold, LostReason::Expired));
            }
        }
        out
    }

    /// The earliest deadline of a live hold, if any.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        lock(&self.map)
            .values()
            .filter(|h| !h.lost && h.releasing == 0)
            .map(|h| h.deadline)
            .min()
            .map(|at| self.instant(at))
    }

    /// Forgets a hold that Redis says is gone (a release found it so); `true` if we believed we
    /// held it. A hold not yet known lost is told lost now ([`LostReason::Gone`]: its token, and
    /// the listener in the background), so a loss first seen by a release is signalled too.
    pub(crate) fn forget_lost(&self, key: &HoldKey) -> bool {
        let mut map = lock(&self.map);
        let Some(mut hold) = map.remove(key) else {
            return false;
        };
        let event = (!hold.lost).then(|| self.event(key, &hold, LostReason::Gone));
        hold.mark_lost();
        drop(map);
        if let Some(event) = event {
            self.report_later(event);
        }
        true
    }

    /// The lost-lock token of a current hold.
    pub(crate) fn token(&self, key: &HoldKey) -> Option<CancellationToken> {
        lock(&self.map).get_mut(key).map(|h| h.lost_token())
    }

    /// Whether `key` is a hold we had and lost (and have not released since), deciding it from
    /// the clock on the spot: a hold whose deadline (its last confirmed lease's end, less the
    /// drift margin) has passed is marked lost here and now, its token cancelled and the
    /// listener told (in the background, once: the renewal loop, coming later, finds it marked),
    /// whether or not the renewal loop has run since (a paused process resumes with its timers
    /// overdue). One clock read and a compare; nothing is sent. A hold with a release in flight
    /// is left to that release, as the renewal loop leaves it.
    pub(crate) fn is_lost(&self, key: &HoldKey) -> bool {
        let mut map = lock(&self.map);
        let Some(hold) = map.get_mut(key) else {
            return false;
        };
        if hold.lost {
            return true;
        }
        if hold.releasing > 0 || hold.deadline > self.at(Instant::now()) {
            return false;
        }
        hold.mark_lost();
        let event = self.event(key, hold, LostReason::Expired);
        drop(map);
        self.report_later(event);
        true
    }

    /// The event telling that the hold `hold` keyed `key` is lost for `reason`.
    fn event(&self, key: &HoldKey, hold: &Hold, reason: LostReason) -> LostLock {
        self.ended(key, hold, HoldEnd::Lost(reason));
        LostLock {
            name: key.name.to_string(),
            owner: key.owner(),
            holder: self.holder(key).to_string(),
            kind: hold.kind,
            reason,
        }
    }

    /// Tells the listener of `event` on a runtime thread (as the renewal loop does), never on the
    /// caller's: a caller reading `is_lost` may hold what the listener takes.
    pub(crate) fn report_later(&self, event: LostLock) {
        let listener = self.listener.clone();
        drop(crate::runtime::spawn(async move {
            super::renewal::report(&listener, vec![event]);
        }));
    }

    /// Takes every hold away and refuses new ones (the client is closing), returning what is
    /// needed to release each.
    pub(crate) fn drain(&self) -> Vec<Drained> {
        let mut map = lock(&self.map);
        self.closed.store(true, Ordering::Relaxed);
        map.drain()
            .inspect(|(k, h)| {
                if !h.lost {
                    self.ended(k, h, HoldEnd::Released);
                }
            })
            .map(|(k, h)| Drained {
                holder: self.holder(&k),
                name: k.name,
                releaser: h.releaser,
            })
            .collect()
    }

    /// The holder string of the hold keyed `key`.
    fn holder(&self, key: &HoldKey) -> Arc<str> {
        let mut text = String::new();
        self.write_holder(key, &mut text);
        Arc::from(text)
    }

    /// Appends the holder string of the hold keyed `key` to `out`: `<client-id>:<owner><suffix>`
    /// for a lock-family hold, the id for a permit's. A hold keeps no string of its own, it is
    /// spelled when a renewal or an event needs it: at 10,000 holds of distinct owners (every
    /// Node acquire outside an owner scope) a string of each kept ~80 bytes per hold.
    pub(crate) fn write_holder(&self, key: &HoldKey, out: &mut String) {
        use std::fmt::Write as _;
        let _ = match &key.by {
            HeldBy::Owner(owner, suffix) => {
                write!(out, "{}:{}{}", self.client_id, owner.get(), suffix)
            }
            HeldBy::Permit(id) => write!(out, "{id}"),
        };
    }

    /// Records how the renewal loop goes to sleep and returns until when: the next renewal round
    /// (`next_round`, when `watching`) or the earliest deadline of a live hold, whichever is
    /// first; `Some(now)` (go round again) if whether any hold is watched changed since the loop
    /// looked. From then on, an acquire that needs the loop earlier notifies
    /// [`changed`](Self::changed).
    pub(crate) fn plan_sleep(&self, watching: bool, next_round: Instant) -> Option<Instant> {
        let map = lock(&self.map);
        let watched_now = map.values().any(|h| h.watched() && !h.lost);
        let at = if watched_now != watching {
            Some(Instant::now())
        } else {
            let deadline = map
                .values()
                .filter(|h| !h.lost && h.releasing == 0)
                .map(|h| h.deadline)
                .min()
                .map(|at| self.instant(at));
            [watching.then_some(next_round), deadline]
                .into_iter()
                .flatten()
                .min()
        };
        *lock(&self.plan) = Plan {
            at,
            watching: watching && watched_now,
        };
        at
    }

    /// Number of holds renewed by the watchdog.
    pub(crate) fn watched_count(&self) -> usize {
        lock(&self.map)
            .values()
            .filter(|h| h.watched() && !h.lost)
            .count()
    }

    /// The next window of the holds the watchdog renews in round `round`: up to `max` watched
    /// holds that no earlier window of this round took, each marked as taken. Zero when the
    /// round has taken every hold. With `renewed_since` (a round retrying a failed one: when the
    /// failed round began), a hold whose lease was confirmed by an operation sent after that
    /// instant is left out: the failed round renewed it (or it was taken since).
    ///
    /// Fills `chunks` with them, in chunks of one renewal kind and at most a batch's size. The
    /// caller keeps `chunks` from one window (and round) to the next, so a window allocates
    /// nothing once it has run at full size. A round goes through the holds window by window
    /// rather than copying them all first: that copy, kept for the next round, cost every held
    /// lock ~90 bytes. Each window scans the whole table (the caller sizes windows so a round
    /// scans it a bounded number of times); a hold recorded during the round is taken by a later
    /// window (a renewal more, which is harmless), a hold released during it is not renewed.
    pub(crate) fn watched_window(
        &self,
        round: u32,
        renewed_since: Option<Instant>,
        max: usize,
        chunks: &mut Vec<Vec<Watched>>,
    ) -> usize {
        let fresh_after = renewed_since.map(|since| self.at(since));
        for chunk in chunks.iter_mut() {
            chunk.clear();
        }
        let mut map = lock(&self.map);
        let mut used = 0;
        let mut taken = 0;
        // The chunk being filled, per renewal kind.
        let mut open: [Option<usize>; RenewKind::COUNT] = [None; RenewKind::COUNT];
        for (k, h) in map.iter_mut() {
            if taken == max {
                break;
            }
            if h.round == round
                || !h.watched()
                || h.lost
                || fresh_after.is_some_and(|after| h.confirmed_sent > after)
            {
                continue;
            }
            h.round = round;
            taken += 1;
            let renew = h.releaser.renew_kind(&k.name);
            let at = match open[renew.index()] {
                Some(at) if chunks[at].len() < self.batch => at,
                _ => {
                    if used == chunks.len() {
                        chunks.push(Vec::with_capacity(self.batch.min(max)));
                    }
                    used += 1;
                    open[renew.index()] = Some(used - 1);
                    used - 1
                }
            };
            chunks[at].push(Watched {
                key: k.clone(),
                tenure: h.tenure,
                renew,
            });
        }
        drop(map);
        // A smaller window than the last: let the spare chunks go.
        chunks.truncate(used);
        taken
    }
}

#[cfg(test)]
mod tests;
