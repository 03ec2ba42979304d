//! An attempt in flight ([`InFlight`]): sent at once, under `wait_for_replicas` checked against
//! the replicas' acknowledgements ([`synced`]), and finished in the background when its caller
//! stops waiting for it; and the caller's side of an acquire task ([`Call`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::engine::{Attempt, Protocol, Request};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime;
use crate::session::Ctx;
use crate::transport::ReplicaAcks;

use super::settle::{give_back_settled, settle_and_give_back};
use super::{Heard, Keeper, Outcome, Shared};

impl<P: Protocol> Shared<P> {
    /// The next attempt, its send time taken now (it goes out when first polled).
    pub(super) fn in_flight(&self) -> InFlight<P> {
        let future: AttemptFuture<P::Won> = match self.cx.replica_sync {
            None => Box::pin(
                self.proto
                    .clone()
                    .attempt(self.cx.clone(), self.request.clone()),
            ),
            Some(sync) => Box::pin(synced(
                sync,
                self.proto.clone(),
                self.cx.clone(),
                self.request.clone(),
                self.keeper.clone(),
            )),
        };
        InFlight {
            future: Some(future),
            heard: self.heard.clone(),
            sent: Instant::now(),
            cx: self.cx.clone(),
            proto: self.proto.clone(),
            keeper: self.keeper.clone(),
            request: self.request.clone(),
            deadline: self.deadline,
        }
    }
}

/// An attempt under `ClientOptions::wait_for_replicas`, given [`ReplicaAcks`] of its own in its
/// request: a win that fewer replicas than asked acknowledged (the fewest any of its synced
/// scripts saw) is given back (until Redis confirms it gone) and the acquire fails with a
/// settled [`ErrorKind::Unavailable`] (nothing is left to ask Redis about).
async fn synced<P: Protocol>(
    sync: crate::options::ReplicaSync,
    proto: Arc<P>,
    cx: Arc<Ctx>,
    request: Request,
    keeper: Arc<dyn Keeper<P::Won>>,
) -> Result<Attempt<P::Won>> {
    let acks = ReplicaAcks::counting();
    let attempt = Request {
        acks: acks.clone(),
        ..request.clone()
    };
    let result = proto.clone().attempt(cx.clone(), attempt).await;
    match (result, acks.fewest()) {
        (Ok(Attempt::Won(_)), Some(acks)) if acks < i64::from(sync.replicas) => {
            let deadline = Instant::now() + cx.outage_tolerance;
            give_back_settled(&proto, &cx, &request, &keeper, deadline).await;
            let name = proto.name();
            Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "'{name}' was acquired on the master, but {acks} of the {} replica(s) asked for \
                     acknowledged it within {:?}, so it was given back and nothing is held; check \
                     the replicas (INFO replication), or lower wait_for_replicas",
                    sync.replicas, sync.timeout
                ),
            )
            .with_lock(name)
            .with_holder(&*request.holder)
            .settled())
        }
        (result, _) => result,
    }
}

/// One attempt, boxed so that it can be moved into a background task after being polled.
type AttemptFuture<W> = Pin<Box<dyn Future<Output = Result<Attempt<W>>> + Send>>;

/// An attempt in flight. Dropped before its answer (the deadline passed, the caller left or
/// cancelled), it finishes in the background: a win is given back, then the give-up clean-up runs.
pub(super) struct InFlight<P: Protocol> {
    future: Option<AttemptFuture<P::Won>>,
    /// Told how the attempt ended, even after it was abandoned.
    heard: Arc<Heard>,
    pub(super) sent: Instant,
    cx: Arc<Ctx>,
    proto: Arc<P>,
    keeper: Arc<dyn Keeper<P::Won>>,
    request: Request,
    /// The wait limit, which a round trip made on the caller's own thread cannot be raced
    /// against: it bounds that round trip instead (see [`crate::transport::lane::ambient::with_deadline`]).
    deadline: Option<Instant>,
}

impl<P: Protocol> Future for InFlight<P> {
    type Output = Result<Attempt<P::Won>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let deadline = self.deadline;
        let future = self.future.as_mut().expect("polled after completion");
        let out =
            crate::transport::lane::ambient::with_deadline(deadline, || future.as_mut().poll(cx));
        if let Poll::Ready(result) = &out {
            self.heard.note(result, true);
            self.future = None;
        }
        out
    }
}

impl<P: Protocol> InFlight<P> {
    /// Finishes the attempt in the background (see the type's docs) and returns the handle of
    /// that clean-up; `None` if the attempt had already finished.
    fn finish_in_background(&mut self) -> Option<JoinHandle<()>> {
        let future = self.future.take()?;
        let (cx, proto, keeper, request, heard) = (
            self.cx.clone(),
            self.proto.clone(),
            self.keeper.clone(),
            self.request.clone(),
            self.heard.clone(),
        );
        let running = cx.settling.begin(proto.name());
        Some(runtime::spawn(async move {
            let _running = running;
            let result = future.await;
            heard.note(&result, true);
            let deadline = Instant::now() + cx.outage_tolerance;
            match result {
                Ok(Attempt::Won(_)) => {
                    give_back_settled(&proto, &cx, &request, &keeper, deadline).await;
                }
                // The reply was lost: ask Redis (on the same connection, after the attempt).
                Err(e) if e.is_unanswered() && proto.can_settle() => {
                    settle_and_give_back(&proto, &cx, &request, &keeper, deadline).await;
                }
                _ => {}
            }
            let _ = proto.give_up(cx, request).await;
        }))
    }

    /// The caller will not wait for the answer: finish the attempt, give back its win and give
    /// up, waiting for all that at most `bound` (it goes on in the background after that), so
    /// that in the usual case the caller sees nothing left behind.
    pub(super) async fn abandon(mut self, bound: Duration) {
        if let Some(cleanup) = self.finish_in_background() {
            let _ = tokio::time::timeout(bound, cleanup).await;
        }
    }
}

impl<P: Protocol> Drop for InFlight<P> {
    fn drop(&mut self) {
        self.finish_in_background();
    }
}

/// The caller's side of an acquire task. Dropped before the result was claimed, it cancels the
/// task and gives back whatever the task won.
pub(super) struct Call<P: Protocol> {
    pub(super) task: Option<JoinHandle<Result<Outcome<P::Won>>>>,
    pub(super) shared: Arc<Shared<P>>,
}

impl<P: Protocol> Drop for Call<P> {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else { return };
        self.shared.token.cancel();
        let keeper = self.shared.keeper.clone();
        let running = self.shared.cx.settling.begin(self.shared.proto.name());
        runtime::spawn(async move {
            let _running = running;
            if let Ok(Ok(Outcome::Won(_))) = task.await {
                keeper.unkeep().await;
            }
        });
    }
}
