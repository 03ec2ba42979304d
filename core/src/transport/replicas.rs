//! `ClientOptions::wait_for_replicas`: acquisitions followed by `WAIT` on a connection of their
//! own, and the replica acks they saw, handed to the acquire loop.

use super::{Conn, ToArg, script_cmd, with_noscript_fallback};
use crate::error::{Result, What};
use crate::scripts::Lua;

impl Conn {
    /// Sends acquisitions (scripts marked `synced`) to `acquisitions`, each followed by `WAIT`
    /// for `sync.replicas` replicas.
    pub(crate) fn wait_for_replicas(&self, acquisitions: Conn, sync: crate::options::ReplicaSync) {
        let _ = self.inner.sync.set((acquisitions, sync));
    }

    /// Runs `script` and `WAIT <replicas> <timeout>` right behind it, in one pipeline on this
    /// connection (so that the `WAIT` counts this script's write, even if the connection is
    /// replaced meanwhile), and notes how many replicas acknowledged for the acquire loop
    /// ([`counting_replica_acks`]). Bounded by the response timeout plus the `WAIT`.
    pub(super) async fn eval_and_wait<T: redis::FromRedisValue>(
        &self,
        script: &Lua,
        keys: &[&str],
        args: &[&dyn ToArg],
        subject: What<'_>,
        sync: crate::options::ReplicaSync,
    ) -> Result<T> {
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
        let (value, acks) = self.settle(reply.ok(), subject)?;
        note_replica_acks(acks);
        Ok(value)
    }
}

tokio::task_local! {
    /// The fewest replicas that acknowledged a synced script of the current attempt.
    static REPLICA_ACKS: std::cell::Cell<Option<i64>>;
}

/// Notes that `acks` replicas acknowledged a synced script (a no-op outside
/// [`counting_replica_acks`]).
fn note_replica_acks(acks: i64) {
    let _ = REPLICA_ACKS.try_with(|seen| {
        seen.set(Some(seen.get().map_or(acks, |before| before.min(acks))));
    });
}

/// Runs `attempt` and says, beside its result, the fewest replicas that acknowledged a synced
/// script it ran (`None`: it ran none). The acks ride a task-local scoped to `attempt` rather than
/// `eval`'s return value because every object's attempt calls `eval` with its own reply type.
pub(crate) async fn counting_replica_acks<T>(
    attempt: impl std::future::Future<Output = T>,
) -> (T, Option<i64>) {
    REPLICA_ACKS
        .scope(std::cell::Cell::new(None), async {
            let result = attempt.await;
            (result, REPLICA_ACKS.with(std::cell::Cell::get))
        })
        .await
}
