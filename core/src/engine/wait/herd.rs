//! The herd pause ([`LostRaces`]): how long a waiter that keeps losing the race after a release
//! waits before its next attempt.

use std::time::{Duration, Instant};

use crate::engine::fastrand_below;

/// A waiter's losses to the herd, and the pause they earn it.
///
/// An unlock message on a lock's channel reaches every process that waits there (Redisson's
/// protocol: the release publishes once, to the channel). Each wakes one waiter, which sends an
/// attempt; one of them (or the releaser itself, taking the lock again) wins and the rest lose.
/// With eight processes hammering one lock that is about seven lost round trips per acquire, and
/// as many wake-ups: on a small machine they take the CPU time the holders need. So a waiter
/// that lost the race after a message pauses before its next attempt, the longer the more races
/// in a row it lost (0.5 ms, doubling, up to 8 ms, each with jitter), and meanwhile lets further
/// messages pass: the attempt after the pause sees whatever they announced. A waiter woken for
/// the first time tries at once, so a hand-over to a lone waiter costs nothing more; a pause never
/// runs past the caller's deadline (the last attempt is made in time instead); and a waiter whose
/// retry hint fired (the holder's lease ran out) tries at once as well.
///
/// A waiter pauses only during the first [`LostRaces::AGED`] of its wait. Past that the pauses
/// (up to 8 ms each, while further releases go by) are what keeps it waiting, not the other
/// processes: it answers every message again, as Redisson's waiters do, until it wins. With eight
/// processes on one lock that cut the longest wait (medians of six rounds: Python 493 → 223 ms, Node
/// 327 → 222 ms) for 4–6% of the ops/s and a few more Redis calls per op (`bench/notes.md` §4).
///
/// Only a process's lone waiter on the channel pauses. With several, a message wakes just one of
/// them (the next message the next one), so the process sends one attempt per release however
/// many wait, and pausing the loser would only leave the lock to whoever runs nearest to it:
/// threads and tasks of one process waited twice as long at worst, for no more throughput.
pub(super) struct LostRaces {
    /// Only on lock channels (an unlock wakes a waiter in every process); a fair lock's message
    /// is for its one waiter, a semaphore's for as many as there are permits.
    herd: bool,
    /// The attempt about to be made follows a message.
    pub(super) after_message: bool,
    /// Races lost in a row: attempts after a message that found the lock taken.
    lost: u32,
    /// When the wait began.
    since: Instant,
}

impl LostRaces {
    const FIRST: Duration = Duration::from_micros(500);
    const MOST: Duration = Duration::from_millis(8);
    /// How long into a wait its waiter may pause.
    const AGED: Duration = Duration::from_millis(200);

    pub(super) fn new(herd: bool) -> Self {
        LostRaces {
            herd,
            after_message: false,
            lost: 0,
            since: Instant::now(),
        }
    }

    /// The wait woke: by a message (`true`) or by the retry hint or the deadline.
    pub(super) fn woken(&mut self, by_message: bool) {
        self.after_message = by_message;
    }

    /// The attempt just made found the lock taken.
    pub(super) fn busy(&mut self) {
        if self.herd && self.after_message {
            self.lost = self.lost.saturating_add(1);
        }
    }

    /// How long to pause before the next attempt, if at all (never up to `deadline`). `alone`:
    /// the process has no other waiter on the channel.
    pub(super) fn pause(&self, alone: bool, deadline: Option<Instant>) -> Option<Duration> {
        if !self.herd || !alone || !self.after_message || self.lost == 0 {
            return None;
        }
        if self.since.elapsed() >= Self::AGED {
            return None;
        }
        let full = Self::FIRST
            .saturating_mul(1u32 << (self.lost - 1).min(8))
            .min(Self::MOST);
        // Between half and all of it, so the losers of one race do not meet again in the next.
        let half = full / 2;
        let micros = u64::try_from(half.as_micros()).unwrap_or(u64::MAX);
        let pause = half + Duration::from_micros(fastrand_below(micros + 1));
        match deadline {
            Some(d) if Instant::now() + pause >= d => None,
            _ => Some(pause),
        }
    }
}
