//! Settling what an attempt whose reply was lost may have won: asking Redis before trying again
//! ([`settle_unanswered`]), settling in the background once the wait ends first
//! ([`abandon_unsettled`], [`settle_and_give_back`]), and giving back such a win without giving it
//! back twice ([`give_back_settled`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::engine::{Attempt, Protocol, Request};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::session::Ctx;
use crate::util::{RetryPause, sleep_until};

use super::{GIVE_UP_GRACE, Gated, Keeper, Shared};

/// The error of an attempt of an object that cannot be settled ([`Protocol::can_settle`])
/// whose reply was lost after it was sent.
fn unknown_outcome<P: Protocol>(s: &Shared<P>, error: &Error) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!(
            "{}; the answer to the attempt was lost after it was sent, and what it takes has no \
             owner to ask Redis about, so it is unknown whether it took it and crosslock did not \
             retry it (that could take it twice): if it did take it, it stays taken until given \
             back or the count is reset",
            error.message()
        ),
    )
    .with_lock(s.proto.name())
}

/// After an attempt that failed for want of Redis: its reply was lost (it may have won: ask
/// Redis before trying again), or it was never sent (a refused connection: nothing to ask).
/// Backs off and tries again for as long as the outage tolerance and the deadline allow.
pub(super) async fn settle_unanswered<P: Protocol>(
    s: &Shared<P>,
    mut error: Error,
    mut sent: Instant,
    abandoned: &mut bool,
) -> Result<Gated<P::Won>> {
    // Whether an attempt of this wait may have run without our knowing its outcome.
    let mut unsettled = !error.is_unsent();
    if unsettled && !s.proto.can_settle() {
        return Err(unknown_outcome(s, &error));
    }
    let since = Instant::now();
    // A single try is bounded by the response timeout from its start: once that has passed, an
    // unanswered attempt is settled in the background and the caller hears that Redis did not
    // answer.
    let settle_by = s.single_by;
    let mut backoff = RetryPause::new();
    loop {
        // The previous attempt may be unsettled: whatever ends the wait now must settle it in
        // the background.
        tokio::select! {
            biased;
            _ = s.token.cancelled() => {
                let cleanup = abandon_unsettled(s);
                let _ = tokio::time::timeout(s.cx.response_timeout(), cleanup).await;
                *abandoned = true;
                return Err(s.cancelled());
            }
            _ = s.cx.stop.cancelled() => return Err(s.cancelled()),
            _ = sleep_until(s.deadline) => {
                abandon_unsettled(s);
                *abandoned = true;
                return Ok(Gated::TimedOut);
            }
            _ = sleep_until(settle_by) => {
                abandon_unsettled(s);
                *abandoned = true;
                return Err(error);
            }
            _ = tokio::time::sleep(backoff.current()) => {}
        }
        backoff.grow();
        if unsettled {
            // Did Redis count a win we have not recorded? (Sent after the attempt on the same
            // connection, so it sees the attempt's effect if the attempt ran.)
            let settled = tokio::select! {
                biased;
                r = s.proto.settle(&s.cx, &s.request.holder, s.keeper.recorded()) => r,
                _ = sleep_until(s.deadline) => {
                    abandon_unsettled(s);
                    *abandoned = true;
                    return Ok(Gated::TimedOut);
                }
                _ = sleep_until(settle_by) => {
                    abandon_unsettled(s);
                    *abandoned = true;
                    return Err(error);
                }
            };
            s.heard.note(&settled, false);
            match settled {
                Ok(Some(won)) => return Ok(Gated::Won(won, sent)),
                Ok(None) if since.elapsed() >= s.cx.outage_tolerance => return Err(error),
                Ok(None) => unsettled = false,
                Err(e) if e.is_unavailable() => {
                    if since.elapsed() >= s.cx.outage_tolerance {
                        abandon_unsettled(s);
                        *abandoned = true;
                        return Err(e);
                    }
                    error = e;
                    continue; // settle again before any new attempt
                }
                Err(e) => return Err(e),
            }
        } else if since.elapsed() >= s.cx.outage_tolerance {
            return Err(error);
        }
        let mut attempt = s.in_flight();
        let result = tokio::select! {
            biased;
            r = &mut attempt => r,
            _ = sleep_until(s.deadline) => {
                attempt.abandon(GIVE_UP_GRACE).await;
                *abandoned = true;
                return Ok(Gated::TimedOut);
            }
            _ = sleep_until(settle_by) => {
                attempt.abandon(GIVE_UP_GRACE).await;
                *abandoned = true;
                return Err(error);
            }
            _ = s.token.cancelled() => {
                attempt.abandon(s.cx.response_timeout()).await;
                *abandoned = true;
                return Err(s.cancelled());
            }
        };
        match result {
            Ok(Attempt::Won(won)) => return Ok(Gated::Won(won, attempt.sent)),
            Ok(Attempt::Busy { retry_in }) => return Ok(Gated::Busy(retry_in)),
            // Never sent: nothing to settle; wait the outage out.
            Err(e) if e.is_unsent() => error = e,
            Err(e) if e.is_unanswered() => {
                if !s.proto.can_settle() {
                    return Err(unknown_outcome(s, &e));
                }
                error = e;
                sent = attempt.sent;
                unsettled = true;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The deadline passed before an unanswered attempt could be settled: settle it in the
/// background, give back a win, then give up.
fn abandon_unsettled<P: Protocol>(s: &Shared<P>) -> JoinHandle<()> {
    let (cx, proto, keeper, request) = (
        s.cx.clone(),
        s.proto.clone(),
        s.keeper.clone(),
        s.request.clone(),
    );
    let running = cx.settling.begin(proto.name());
    runtime::spawn(async move {
        let _running = running;
        let deadline = Instant::now() + cx.outage_tolerance;
        settle_and_give_back(&proto, &cx, &request, &keeper, deadline).await;
        let _ = proto.give_up(cx, request).await;
    })
}

/// Asks Redis whether an abandoned attempt whose answer was lost won, again while Redis does not
/// answer (the question's own answer can be lost too: a pause longer than two response timeouts
/// loses both), until `deadline`; gives back a win.
pub(super) async fn settle_and_give_back<P: Protocol>(
    proto: &Arc<P>,
    cx: &Arc<Ctx>,
    request: &Request,
    keeper: &Arc<dyn Keeper<P::Won>>,
    deadline: Instant,
) {
    loop {
        match proto.settle(cx, &request.holder, keeper.recorded()).await {
            Ok(Some(_)) => return give_back_settled(proto, cx, request, keeper, deadline).await,
            Err(e) if e.is_unavailable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return,
        }
    }
}

/// Gives back the hold an abandoned attempt won. A give-back that gets no answer may or may not
/// have run, so it is not sent twice: Redis is asked again (a hold given back settles to
/// nothing left) and the give-back repeated only while the hold is still there, until
/// `deadline`.
pub(super) async fn give_back_settled<P: Protocol>(
    proto: &Arc<P>,
    cx: &Arc<Ctx>,
    request: &Request,
    keeper: &Arc<dyn Keeper<P::Won>>,
    deadline: Instant,
) {
    let mut held = true;
    loop {
        if held {
            let given = proto
                .clone()
                .give_back(cx.clone(), request.holder.clone(), keeper.lease_after())
                .await;
            match given {
                Err(e) if e.is_unavailable() && proto.can_settle() && Instant::now() < deadline => {
                }
                _ => return,
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        match proto.settle(cx, &request.holder, keeper.recorded()).await {
            Ok(Some(_)) => held = true,
            Err(e) if e.is_unavailable() && Instant::now() < deadline => held = false,
            _ => return,
        }
    }
}
