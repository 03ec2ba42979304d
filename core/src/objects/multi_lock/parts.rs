//! The parts of a [`MultiLock`](super::MultiLock) or [`RedLock`](super::RedLock): acquiring them
//! in rounds against a quorum, and deciding, extending and releasing an acquisition of them.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::engine::any_lock::AnyLock;
use crate::engine::clock_drift;
use crate::error::{Error, ErrorKind, Result};
use crate::kinds::LockKind;
use crate::options::AcquireOptions;
use crate::owner::Owner;
use crate::telemetry::ObjectType;

/// From how many parts a round first tries them all at once ([`Parts::try_all`]): with fewer,
/// one by one costs a few round trips, and a busy first part is not tried along with the rest.
const TRY_ALL_FROM: usize = 8;

/// How many parts' first tries are in flight at once.
const TRIES_IN_FLIGHT: usize = 256;

/// How long one cycle of an acquire without a wait limit waits, per part (Redisson's 1.5 s).
const CYCLE_PER_PART: Duration = Duration::from_millis(1500);

/// What the composite needs: how many parts must be held, and how long each part may wait.
#[derive(Clone)]
pub(super) struct Parts {
    pub(super) locks: Vec<Arc<dyn AnyLock>>,
    /// How many parts must be acquired: all (MultiLock) or a majority (RedLock).
    pub(super) quorum: usize,
    /// Whether a round may try every part at once ([`Parts::try_all`]): not when the parts
    /// include both the read and the write lock of one read-write lock, for which the order they
    /// are taken in decides (the write lock, then the read lock, is allowed; the read lock, then
    /// the write lock, is not), while tries sent together may reach Redis in either order.
    all_at_once: bool,
    /// Made as a red lock (a majority quorum): what messages call it.
    pub(super) red: bool,
}

/// One acquisition: the parts held, in order.
pub(super) struct Held {
    pub(super) parts: Vec<Arc<dyn AnyLock>>,
}

impl Parts {
    pub(super) fn new(locks: Vec<Arc<dyn AnyLock>>, red: bool) -> Result<Self> {
        if locks.is_empty() {
            return Err(Error::invalid("a multi-lock needs at least one lock"));
        }
        let quorum = if red {
            locks.len() / 2 + 1
        } else {
            locks.len()
        };
        let all_at_once = locks.len() >= TRY_ALL_FROM && !both_halves_of_a_read_write_lock(&locks);
        Ok(Parts {
            locks,
            quorum,
            all_at_once,
            red,
        })
    }

    /// The parts `owner` holds through this process (their clients record a hold).
    pub(super) fn taken_by(&self, owner: Owner) -> Vec<Arc<dyn AnyLock>> {
        self.locks
            .iter()
            .filter(|l| l.lost_token(owner).is_some())
            .cloned()
            .collect()
    }

    /// What messages call the composite.
    pub(super) fn what(&self) -> &'static str {
        if self.red { "red lock" } else { "multi-lock" }
    }

    pub(super) fn names(&self) -> String {
        self.locks
            .iter()
            .map(|l| format!("'{}'", l.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The wait one part gets out of what is left (RedLock: a share of it, at least 1 ms).
    fn part_wait(&self, left: Duration) -> Duration {
        if self.quorum == self.locks.len() {
            left
        } else {
            (left / self.locks.len() as u32).max(Duration::from_millis(1))
        }
    }

    /// One round over every part, in order; gives back what it took when the quorum can no
    /// longer be reached, or when the round is dropped (cancelled) half-way.
    ///
    /// With many parts, every part is first tried once, all together ([`Parts::try_all`]); the
    /// parts before the first busy one are kept as taken, and the round goes on one part after
    /// another from that one, as it always does with few parts.
    async fn round(
        &self,
        owner: Owner,
        wait: Duration,
        lease: Option<Duration>,
        cancel: &Option<CancellationToken>,
        deadline: Instant,
    ) -> Result<std::result::Result<Held, Missed>> {
        let allowed_failures = self.locks.len() - self.quorum;
        let mut taken = Taken {
            parts: Vec::new(),
            owner,
        };
        let mut missed = Missed::default();
        let mut from = 0;
        if self.all_at_once {
            from = self
                .try_all(owner, lease, cancel, &mut taken, &mut missed)
                .await?;
        }
        for lock in &self.locks[from..] {
            if missed.busy + missed.errors > allowed_failures {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let mut options = AcquireOptions::new().wait(self.part_wait(left).min(wait));
            if let Some(lease) = lease {
                options = options.lease(lease);
            }
            if let Some(token) = cancel {
                options = options.cancel(token.clone());
            }
            match lock.acquire_as(owner, &options).await {
                Ok(Some(_)) => taken.parts.push(lock.clone()),
                Ok(None) => missed.busy += 1,
                // Its share of the wait passed with its Redis out of reach: like a busy part,
                // tried again in the next round while the outage is shorter than its client's
                // tolerance.
                Err(e) if e.is_outage_at_deadline() => {
                    missed.busy += 1;
                    missed.unreached_parts += 1;
                    let tolerance = lock.client().outage_tolerance();
                    missed.unreached =
                        Some(missed.unreached.map_or(tolerance, |t| t.min(tolerance)));
                    missed.last = Some((lock.name().to_owned(), e));
                }
                Err(e) if e.is_cancelled() => {
                    release(&taken.give_back(), owner).await;
                    return Err(e);
                }
                Err(e) => {
                    missed.errors += 1;
                    missed.last = Some((lock.name().to_owned(), e));
                }
            }
        }
        if missed.busy + missed.errors > allowed_failures {
            release(&taken.give_back(), owner).await;
            // Failed parts beyond what the quorum spares: waiting for a busy part cannot help.
            missed.hopeless = missed.errors > allowed_failures;
            return Ok(Err(missed));
        }
        Ok(Ok(Held {
            parts: taken.give_back(),
        }))
    }

    /// Tries every part once, all together (at most [`TRIES_IN_FLIGHT`] at once, never one
    /// blocking round trip after another on the caller's lane), adding the parts it wins to
    /// `taken` as they come (so that a round dropped meanwhile gives them back). Returns where
    /// the round goes on: at the first part found busy (or out of reach), after giving back what it won beyond
    /// it (holding only parts before every part it waits for, as when taking them one by one,
    /// so two rounds over the same parts cannot each hold what the other waits for); past the
    /// end when none was busy. The errors of the parts before that count in `missed`, in order,
    /// up to the first the quorum cannot spare.
    async fn try_all(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        cancel: &Option<CancellationToken>,
        taken: &mut Taken,
        missed: &mut Missed,
    ) -> Result<usize> {
        let mut options = AcquireOptions::new().wait(Duration::ZERO);
        if let Some(lease) = lease {
            options = options.lease(lease);
        }
        if let Some(token) = cancel {
            options = options.cancel(token.clone());
        }
        let options = &options;
        let mut outcomes: Vec<Option<Result<bool>>> = Vec::new();
        outcomes.resize_with(self.locks.len(), || None);
        crate::transport::fanout::at_most_in_flight(
            TRIES_IN_FLIGHT,
            self.locks
                .iter()
                .enumerate()
                .map(|(i, lock)| async move { (i, lock.acquire_as(owner, options).await) }),
            |(i, outcome)| {
                if let Ok(Some(_)) = outcome {
                    taken.parts.push(self.locks[i].clone());
                }
                outcomes[i] = Some(outcome.map(|won| won.is_some()));
            },
        )
        .await;
        let mut outcomes: Vec<Result<bool>> = outcomes
            .into_iter()
            .map(|o| o.expect("every part was tried"))
            .collect();
        if let Some(at) = outcomes
            .iter()
            .position(|o| o.as_ref().is_err_and(Error::is_cancelled))
        {
            let e = outcomes.swap_remove(at).expect_err("a cancelled try");
            release(&taken.give_back(), owner).await;
            return Err(e);
        }
        // A part whose Redis is out of reach is waited for as a busy one is (one by one, its
        // client riding the outage out), not counted as failed.
        let from = outcomes
            .iter()
            .position(|o| match o {
                Ok(won) => !won,
                Err(e) => e.is_unavailable(),
            })
            .unwrap_or(self.locks.len());
        // Taken in the order the tries came back: kept in the parts' order, before `from`.
        taken.give_back();
        let won = |i: &usize| matches!(outcomes[*i], Ok(true));
        taken.parts = (0..from)
            .filter(won)
            .map(|i| self.locks[i].clone())
            .collect();
        let beyond: Vec<_> = (from..self.locks.len())
            .filter(won)
            .map(|i| self.locks[i].clone())
            .collect();
        if !beyond.is_empty() {
            // Given back before waiting for part `from`; a release that fails leaves that part
            // to its lease, as any failed release does.
            release(&beyond, owner).await;
        }
        // Counted as one by one would: up to the error the quorum cannot spare, which is the one
        // to report.
        let allowed_failures = self.locks.len() - self.quorum;
        for (lock, outcome) in self.locks[..from].iter().zip(outcomes) {
            if missed.errors > allowed_failures {
                break;
            }
            if let Err(e) = outcome {
                missed.errors += 1;
                missed.last = Some((lock.name().to_owned(), e));
            }
        }
        Ok(from)
    }

    fn failed(&self, part: &str, e: &Error) -> Error {
        Error::new(
            e.kind(),
            format!(
                "could not take the multi-lock of {}: lock '{part}' failed: {e}; nothing is held",
                self.names()
            ),
        )
        .with_lock(part)
    }

    /// Acquires the parts for `owner` (measured as the composite's wait: its parts' tries are
    /// measured as their own).
    pub(super) async fn acquire_as(
        &self,
        owner: Owner,
        options: &AcquireOptions,
    ) -> Result<Option<Held>> {
        let start = Instant::now();
        let Some(telemetry) = self.locks[0].client().options().telemetry.as_ref() else {
            return self.acquire_from(start, owner, options).await;
        };
        let object = match self.red {
            true => ObjectType::RedLock,
            false => ObjectType::MultiLock,
        };
        let name = self.names();
        crate::telemetry::measured(Some(telemetry), object, &name, start, async {
            self.acquire_from(start, owner, options).await
        })
        .await
    }

    async fn acquire_from(
        &self,
        start: Instant,
        owner: Owner,
        options: &AcquireOptions,
    ) -> Result<Option<Held>> {
        if let Some(lease) = options.lease {
            AcquireOptions::new().lease(lease).validate(&self.names())?;
        }
        let mut last: Option<(String, Error)> = None;
        // Since when rounds keep missing parts whose Redis is out of reach.
        let mut unreached_since: Option<Instant> = None;
        loop {
            let round_start = Instant::now();
            // A wait limit covers the whole; without one, cycles of (parts × 1.5 s) repeat.
            let (deadline, cycle) = match options.wait {
                Some(w) => (start + w, w),
                None => {
                    let cycle = CYCLE_PER_PART * self.locks.len() as u32;
                    (Instant::now() + cycle, cycle)
                }
            };
            // With a lease, a part taken first must still have it when the last is taken.
            let lease = options.lease.map(|l| {
                l + if options.wait == Some(Duration::ZERO) {
                    Duration::ZERO
                } else {
                    cycle
                }
            });
            let missed = match self
                .round(owner, cycle, lease, &options.cancel, deadline)
                .await?
            {
                Ok(held) => return Ok(Some(held)),
                Err(missed) => missed,
            };
            let mut hopeless = missed.hopeless;
            // Only parts out of reach beyond what the quorum spares keep it from being had; with
            // fewer, the parts that answered busy did.
            let spared = self.locks.len() - self.quorum;
            let unreachable = missed.unreached_parts > spared;
            match missed.unreached.filter(|_| unreachable) {
                Some(tolerance) => {
                    let since = *unreached_since.get_or_insert(round_start);
                    // An outage longer than the tolerance ends the wait, as it ends a lock's.
                    hopeless |= since.elapsed() >= tolerance;
                }
                None => unreached_since = None,
            }
            last = missed.last.or(last);
            if hopeless {
                // More parts failed (a server down, the client closed, a wrong type) than the
                // quorum can spare: no wait cures that here, each part has retried on its own.
                let (part, e) = last.as_ref().expect("a hopeless round has an error");
                return Err(self.failed(part, e));
            }
            let out_of_time = options
                .wait
                .is_some_and(|w| w.is_zero() || start.elapsed() >= w);
            if out_of_time {
                // An error (a server down) says more than a plain timeout: report it, naming the part.
                return match last {
                    // Out of reach, but a busy majority of the other parts was what kept it.
                    Some((_, e)) if e.is_outage_at_deadline() && !unreachable => Ok(None),
                    Some((part, e)) if !e.is_timeout() => Err(self.failed(&part, &e)),
                    _ => Ok(None),
                };
            }
        }
    }
}

/// Whether `locks` include the read and the write lock of one name.
fn both_halves_of_a_read_write_lock(locks: &[Arc<dyn AnyLock>]) -> bool {
    let names = |kind: LockKind| -> HashSet<&str> {
        locks
            .iter()
            .filter(|l| l.kind() == kind)
            .map(|l| l.name())
            .collect()
    };
    let read = names(LockKind::ReadLock);
    !read.is_empty() && !read.is_disjoint(&names(LockKind::WriteLock))
}

/// Why a round missed its quorum.
#[derive(Default)]
struct Missed {
    /// Parts still held by others when their share of the wait ran out.
    busy: usize,
    /// Parts that failed with an error.
    errors: usize,
    /// The last error, naming its part.
    last: Option<(String, Error)>,
    /// More parts failed than the quorum can spare.
    hopeless: bool,
    /// Some part's share of the wait passed with its Redis out of reach: the shortest outage
    /// tolerance of those parts' clients.
    unreached: Option<Duration>,
    /// How many parts those were.
    unreached_parts: usize,
}

/// The parts a round has taken so far; given back if the round is dropped before it ends.
struct Taken {
    parts: Vec<Arc<dyn AnyLock>>,
    owner: Owner,
}

impl Taken {
    fn give_back(&mut self) -> Vec<Arc<dyn AnyLock>> {
        std::mem::take(&mut self.parts)
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        release_later(self.give_back(), self.owner);
    }
}

/// Releases `parts` in the background (at most [`RELEASES_IN_FLIGHT`] at once), counted as a
/// clean-up of each part's client so that the owner's next acquire of a part waits for it (see
/// [`Settling`](crate::engine::settling::Settling)).
pub(super) fn release_later(parts: Vec<Arc<dyn AnyLock>>, owner: Owner) {
    if parts.is_empty() {
        return;
    }
    let running: Vec<_> = parts
        .iter()
        .filter_map(|l| Some(l.client().state_now()?.settling.begin(l.name())))
        .collect();
    crate::runtime::spawn(async move {
        crate::transport::fanout::at_most_in_flight(
            RELEASES_IN_FLIGHT,
            parts.iter().map(|l| l.release_as(owner)),
            drop,
        )
        .await;
        drop(running);
    });
}

/// Whether an acquisition holding `parts` (those taken) is lost: fewer of them are still held than
/// `quorum` (every part for a [`MultiLock`](super::MultiLock), a majority of all parts for a
/// [`RedLock`](super::RedLock)). Each part decides from the clock on the spot
/// ([`AnyLock::is_lost`]), so a part whose deadline passed counts as lost at once; nothing is sent.
pub(super) fn too_many_lost(parts: &[Arc<dyn AnyLock>], owner: Owner, quorum: usize) -> bool {
    if parts.is_empty() {
        return false;
    }
    let lost = parts.iter().filter(|l| l.is_lost(owner)).count();
    parts.len() - lost < quorum
}

/// What releasing an acquisition of `held` parts answers, from the parts that failed: the
/// lost-lock error once fewer than `quorum` parts were still held (the composite is lost, as its
/// `lost` says); a lost part the quorum can spare (a red lock's minority) is logged, not raised,
/// since the composite was held all along and what remained is released. Otherwise the first
/// other failure (not-held ones left out with `skip_not_held`), naming its part.
pub(super) fn release_outcome(
    what: &str,
    held: usize,
    quorum: usize,
    failed: Vec<(String, Error)>,
    skip_not_held: bool,
) -> Result<()> {
    let is_lost = |e: &Error| e.kind() == ErrorKind::LockLost;
    let lost = failed.iter().filter(|(_, e)| is_lost(e)).count();
    let first = if held.saturating_sub(lost) < quorum {
        failed.iter().find(|(_, e)| is_lost(e))
    } else {
        for (part, _) in failed.iter().filter(|(_, e)| is_lost(e)) {
            tracing::warn!(
                target: "crosslock",
                "releasing the {what}: part '{part}' was lost, but {} of its {held} parts were \
                 still held (a majority): the {what} was held and is released",
                held - lost
            );
        }
        failed
            .iter()
            .find(|(_, e)| !(is_lost(e) || (skip_not_held && e.is_not_held())))
    };
    match first {
        None => Ok(()),
        Some((part, e)) => Err(Error::new(
            e.kind(),
            format!("releasing the {what}: lock '{part}': {e}"),
        )
        .with_lock(part)),
    }
}

/// Extends every part of `parts` held by `owner` to `lease` from now, all at once; the validity
/// that leaves (`lease − time taken − clock drift`, as an acquire's). The outcome is a release's:
/// fine while at least `quorum` parts were extended (a red lock's failed minority is logged);
/// else [`ErrorKind::LockLost`] naming a lost part if one was lost, or the first part's error.
pub(super) async fn extend(
    what: &str,
    parts: &[Arc<dyn AnyLock>],
    owner: Owner,
    lease: Duration,
    quorum: usize,
) -> Result<Duration> {
    if parts.is_empty() {
        return Err(Error::new(
            ErrorKind::NotHeld,
            format!(
                "cannot extend the {what}: this owner holds none of its parts; acquire it first"
            ),
        ));
    }
    let start = Instant::now();
    let mut failed: Vec<(usize, Error)> = Vec::new();
    crate::transport::fanout::at_most_in_flight(
        parts.len(),
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| async move { (i, p.extend_as(owner, lease).await) }),
        |(i, result)| {
            if let Err(e) = result {
                failed.push((i, e));
            }
        },
    )
    .await;
    failed.sort_by_key(|&(i, _)| i);
    let failed: Vec<(String, Error)> = failed
        .into_iter()
        .map(|(i, e)| (parts[i].name().to_owned(), e))
        .collect();
    let validity = lease
        .saturating_sub(start.elapsed())
        .saturating_sub(clock_drift(lease));
    if parts.len() - failed.len() >= quorum {
        for (part, e) in &failed {
            tracing::warn!(
                target: "crosslock",
                "extending the {what}: part '{part}' was not extended ({e}), but {} of its {} \
                 parts were (a majority)",
                parts.len() - failed.len(),
                parts.len()
            );
        }
        return Ok(validity);
    }
    let (part, e) = failed
        .iter()
        .find(|(_, e)| e.kind() == ErrorKind::LockLost)
        .unwrap_or(&failed[0]);
    Err(Error::new(
        e.kind(),
        format!("extending the {what}: lock '{part}': {e}"),
    )
    .with_lock(part))
}

/// How many parts' releases are in flight at once: all pipelined on the multiplexed connection,
/// each timed from when it is sent (tens of thousands at once went past the response timeout
/// while still queued, and held their commands and replies in memory together).
const RELEASES_IN_FLIGHT: usize = 256;

/// Releases every part, all at once (at most [`RELEASES_IN_FLIGHT`] in flight), never one
/// blocking round trip after another on the caller's lane; the parts that failed, in order.
/// Dropped half-way, it leaves nothing held: a release begun completes in the background (as
/// every release does), and the parts not begun yet are released in the background too.
pub(super) async fn release(parts: &[Arc<dyn AnyLock>], owner: Owner) -> Vec<(String, Error)> {
    let rest = NotBegun {
        parts,
        begun: parts.iter().map(|_| AtomicBool::new(false)).collect(),
        owner,
    };
    let rest = &rest;
    let mut failed = Vec::new();
    crate::transport::fanout::at_most_in_flight(
        RELEASES_IN_FLIGHT,
        parts.iter().enumerate().map(|(i, l)| async move {
            let mut release = l.release_as(owner);
            // Begun once polled: from then on a drop completes it in the background.
            let result = std::future::poll_fn(|cx| {
                let polled = release.as_mut().poll(cx);
                rest.begun[i].store(true, Ordering::Relaxed);
                polled
            })
            .await;
            (i, result)
        }),
        |(i, result)| {
            if let Err(e) = result {
                failed.push((i, e));
            }
        },
    )
    .await;
    failed.sort_by_key(|&(i, _)| i);
    failed
        .into_iter()
        .map(|(i, e)| (parts[i].name().to_owned(), e))
        .collect()
}

/// The parts of a [`release`], and whether each one's release has begun (been polled): a
/// future the fan-out made but had not polled yet when it was dropped released nothing.
struct NotBegun<'a> {
    parts: &'a [Arc<dyn AnyLock>],
    begun: Vec<AtomicBool>,
    owner: Owner,
}

impl Drop for NotBegun<'_> {
    fn drop(&mut self) {
        let parts = self
            .parts
            .iter()
            .zip(&self.begun)
            .filter(|(_, begun)| !begun.load(Ordering::Relaxed))
            .map(|(part, _)| part.clone())
            .collect();
        release_later(parts, self.owner);
    }
}
