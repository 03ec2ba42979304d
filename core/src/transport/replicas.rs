//! `ClientOptions::wait_for_replicas`: acquisitions followed by `WAIT` on a connection of their
//! own, and the replica acks they saw, noted in the attempt's [`ReplicaAcks`].

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::{Conn, ToArg, script_cmd, with_noscript_fallback};
use crate::error::{Result, What};
use crate::scripts::{Lua, Synced};

/// Where one acquire attempt's synced scripts ([`Conn::eval_synced`]) note how many replicas
/// acknowledged them: the attempt's acquire loop reads the fewest afterwards. The engine makes
/// one per attempt under `wait_for_replicas` and hands it to the attempt in its request; the
/// default one notes nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReplicaAcks(Option<Arc<AtomicI64>>);

/// What a counting [`ReplicaAcks`] holds before a synced script noted any acks.
const NONE_RAN: i64 = i64::MAX;

impl ReplicaAcks {
    /// A fresh one, for one attempt.
    pub(crate) fn counting() -> Self {
        ReplicaAcks(Some(Arc::new(AtomicI64::new(NONE_RAN))))
    }

    fn note(&self, acks: i64) {
        if let Some(fewest) = &self.0 {
            fewest.fetch_min(acks, Ordering::Relaxed);
        }
    }

    /// The fewest replicas that acknowledged a synced script noted here (`None`: none ran).
    pub(crate) fn fewest(&self) -> Option<i64> {
        let fewest = self.0.as_ref()?.load(Ordering::Relaxed);
        (fewest != NONE_RAN).then_some(fewest)
    }
}

impl Conn {
    /// Sends acquisitions ([`Synced`] scripts, see [`Conn::eval_synced`]) to `acquisitions`, each
    /// followed by `WAIT` for `sync.replicas` replicas.
    pub(crate) fn wait_for_replicas(&self, acquisitions: Conn, sync: crate::options::ReplicaSync) {
        let _ = self.inner.sync.set((acquisitions, sync));
    }

    /// Runs an acquisition as [`Conn::eval`] does. With `ClientOptions::wait_for_replicas`, it
    /// goes to the acquisitions' connection instead, followed by `WAIT`, and how many replicas
    /// acknowledged it is noted in `acks`, the attempt's.
    pub(crate) async fn eval_synced<'w, T: redis::FromRedisValue>(
        &self,
        acks: &ReplicaAcks,
        script: &Synced,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: impl Into<What<'w>>,
    ) -> Result<T> {
        let call = self.eval_synced_untraced(acks, script, keys, args, subject.into());
        let name = script.lua().name;
        crate::telemetry::spans::script(self.telemetry(), name, || self.address(), true, call).await
    }

    /// [`Conn::eval_synced`] without its span.
    async fn eval_synced_untraced<'w, T: redis::FromRedisValue>(
        &self,
        acks: &ReplicaAcks,
        script: &Synced,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: What<'w>,
    ) -> Result<T> {
        let Some((acquisitions, sync)) = self.inner.sync.get() else {
            return self.eval_untraced(script.lua(), keys, args, subject).await;
        };
        // Boxed: rare, and kept out of the state of every other call.
        let (value, replicas) =
            Box::pin(acquisitions.eval_and_wait(script.lua(), keys, args, subject, *sync)).await?;
        acks.note(replicas);
        Ok(value)
    }

    /// Runs `script` and `WAIT <replicas> <timeout>` right behind it, in one pipeline on this
    /// connection (so that the `WAIT` counts this script's write, even if the connection is
    /// replaced meanwhile): its reply, and how many replicas acknowledged. Bounded by the
    /// response timeout plus the `WAIT`.
    async fn eval_and_wait<T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: What<'_>,
        sync: crate::options::ReplicaSync,
    ) -> Result<(T, i64)> {
        if self.is_cluster() {
            crate::transport::cluster::script_slot(keys)?;
        }
        let manager = self.manager();
        self.touch();
        let pipeline = |whole: bool| {
            let mut pipe = redis::pipe();
            pipe.add_command(script_cmd(script, keys, args, whole))
                .cmd("WAIT")
                .arg(sync.replicas)
                .arg(sync.timeout.as_millis() as u64);
            pipe
        };
        let whole = self.first_send(script);
        let run = with_noscript_fallback(manager, whole, |mut manager, whole| {
            let pipe = pipeline(whole);
            async move {
                let reply = pipe.query_async::<(T, i64)>(&mut manager).await;
                (manager, reply)
            }
        });
        let bound = self.inner.response_timeout + sync.timeout;
        let reply = tokio::time::timeout(bound, run).await;
        self.settle(reply.ok(), subject)
    }
}
