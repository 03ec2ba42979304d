//! Fan-outs: many calls awaited together, grouped by the node they go to.
//!
//! Every fan-out of the crate goes through [`at_most_in_flight`], which polls its parts with no
//! lane, and every fan-out that sends calls to many nodes through [`per_group`]: one group per
//! node (a cluster master; on one server, or behind Sentinel, the one group), each group's calls
//! at most a number in flight, the groups side by side, so that a master that does not answer
//! keeps no other master's calls waiting. Two fan-outs go to many nodes:
//!
//! - `close()`'s releases, grouped by [`Conn::by_master`];
//! - the renewal loop's batches, through a [`Fanout`] the loop keeps from round to round: it
//!   knows the cluster's slot map, whether the masters run the per-node scripts, and has a link
//!   of its own to each master. The engine says what a batch sends and what its answer means
//!   (a [`Job`]); which batches there are and where each goes is decided here.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result, What};
use crate::scripts::Lua;
use crate::transport::{Conn, MasterLinks, SlotRange, ToArg};
use crate::util::lock;

/// Awaits the futures `work` yields with at most `limit` of them alive at once (each made only
/// when it is its turn: the futures, commands and replies of 10,000 holds are never alive
/// together), handing each output to `each` as it comes. The crate's one fan-out: the renewal
/// rounds and `close()` (each group of [`per_group`]), and a multi-lock's tries, extensions and
/// releases all go through it. A loop, not a stream adapter (whose closures would make the
/// callers' futures' `Send` depend on a higher-ranked lifetime the compiler cannot prove, and
/// some are spawned).
///
/// The parts are polled with no lane ([`no_lane`](crate::transport::lane::ambient::no_lane)):
/// polled on a blocking caller's lane, each would make its round trip in turn, one blocking
/// call after another, where the multiplexed connection pipelines them all.
pub(crate) async fn at_most_in_flight<F: Future>(
    limit: usize,
    work: impl Iterator<Item = F>,
    mut each: impl FnMut(F::Output),
) {
    use futures_util::StreamExt;
    let mut waiting = work;
    let mut in_flight = futures_util::stream::FuturesUnordered::new();
    crate::transport::lane::ambient::no_lane(async move {
        loop {
            while in_flight.len() < limit {
                let Some(next) = waiting.next() else { break };
                in_flight.push(next);
            }
            let Some(output) = in_flight.next().await else {
                break;
            };
            each(output);
        }
    })
    .await;
}

/// Runs `groups` side by side, each group's calls [`at_most_in_flight`] `limit` at a time, and
/// hands every call's output to `each` as it comes. A group is a future that readies it (opens
/// a link to its node, say; `false`: its calls are not made) and its calls, each made when it is
/// its turn. Everything is polled with no lane.
pub(crate) async fn per_group<R, I>(
    limit: usize,
    groups: impl IntoIterator<Item = (R, I)>,
    each: impl Fn(<I::Item as Future>::Output),
) where
    R: Future<Output = bool>,
    I: Iterator<Item: Future>,
{
    let each = &each;
    let groups = groups.into_iter().map(|(ready, calls)| async move {
        if ready.await {
            at_most_in_flight(limit, calls, each).await;
        }
    });
    crate::transport::lane::ambient::no_lane(futures_util::future::join_all(groups)).await;
}

impl Conn {
    /// `items` in groups, one per master serving the key `key` gives of each (in no order that
    /// means anything); on one server, or when the masters are not known by `deadline` (no node
    /// answered), one group.
    pub(crate) async fn by_master<T>(
        &self,
        items: Vec<T>,
        key: impl Fn(&T) -> &str,
        deadline: tokio::time::Instant,
    ) -> Vec<Vec<T>> {
        let keys: Vec<&str> = items.iter().map(&key).collect();
        let masters = tokio::time::timeout_at(deadline, self.masters_of(&keys)).await;
        let masters = masters.unwrap_or_else(|_| vec![None; keys.len()]);
        drop(keys);
        let mut by_master = std::collections::BTreeMap::<Option<u64>, Vec<T>>::new();
        for (item, master) in items.into_iter().zip(masters) {
            by_master.entry(master).or_default().push(item);
        }
        by_master.into_values().collect()
    }

    /// The fan-out of a renewal loop, which it keeps from round to round (see [`Fanout`]).
    pub(crate) fn fanout(&self) -> Fanout {
        Fanout {
            conn: self.clone(),
            ranges: None,
            stale: false,
            // Found at connect: the nodes run the per-node scripts' cross-slot mark.
            per_node: self.cross_slot_scripts(),
            links: MasterLinks::default(),
            recheck: false,
            silent: Silent::default(),
        }
    }
}

/// What a [`Fanout`]'s caller (the renewal loop) says of its calls: the key and kind of each
/// item, what a call sends, and what becomes of its answer.
pub(crate) trait Job: Sync + Send {
    /// What one call is about (a hold to renew): one key each.
    type Item: Sync + Send;
    /// What the calls of one pass share (made as each pass begins: a window's per-node calls,
    /// then its per-slot ones).
    type Pass: Sync + Send;

    /// The key `item`'s script touches (the one its call is routed by).
    fn key<'i>(&self, item: &'i Self::Item) -> &'i str;
    /// Which kind of call `item` needs: a call holds items of one kind.
    fn kind(&self, item: &Self::Item) -> usize;
    /// The most items in one call.
    fn batch(&self) -> usize;
    /// How many calls of one group are in flight at once.
    fn in_flight(&self) -> usize;
    /// The longest a group waits for a link to its master.
    fn bound(&self) -> Duration;
    /// See [`Job::Pass`].
    fn pass(&self) -> Self::Pass;
    /// Makes one call for `items` (by [`Call::eval`]): when it was sent, and its answer.
    fn send<'s>(
        &'s self,
        pass: &'s Self::Pass,
        call: Call<'s>,
        items: &'s [&'s Self::Item],
    ) -> impl Future<Output = (Instant, Result<Vec<i64>>)> + Send + 's;
    /// A call's answer, one flag per item (the items a node turned out not to serve are left
    /// out: they go again, by slot).
    fn answered(&self, items: Vec<&Self::Item>, sent: Instant, flags: Vec<i64>);
    /// A call of `count` items failed, to `master` (`host:port`; `None`: the one server). `again`:
    /// another failure of a node already told of in this round.
    fn failed(&self, count: usize, master: Option<&str>, e: &Error, again: bool);
}

/// Where one call of a [`Job`] goes, handed to [`Job::send`].
pub(crate) struct Call<'a> {
    conn: &'a Conn,
    links: &'a MasterLinks,
    master: &'a Node,
    /// `Some(slot)`: the per-node script, sent to the master serving `slot`; `None`: the script
    /// with declared keys, routed by them.
    node: Option<u16>,
    keys: &'a [&'a str],
}

impl Call<'_> {
    /// Runs the call's script: `by_keys` with the items' keys declared (one server, one slot), or
    /// `per_node` on the master serving them, with their count and the keys before `args`.
    pub(crate) async fn eval(
        &self,
        by_keys: &Lua,
        per_node: &Lua,
        args: &[&dyn ToArg],
    ) -> Result<Vec<i64>> {
        match (self.node, self.master) {
            (Some(slot), Some(master)) => {
                let count = self.keys.len();
                let mut all: Vec<&dyn ToArg> = Vec::with_capacity(1 + count + args.len());
                all.push(&count);
                for key in self.keys {
                    all.push(key);
                }
                all.extend_from_slice(args);
                let subject = What::Connection;
                self.conn
                    .eval_on_master(self.links, master, slot, per_node, &all, subject)
                    .await
            }
            (None, _) => {
                let subject = What::Connection;
                self.conn.eval(by_keys, self.keys, args, subject).await
            }
            // Never made: a per-node batch is always in the group of its master.
            (Some(_), None) => Err(Error::new(
                ErrorKind::Redis,
                "a per-node renewal script had no master to go to (a crosslock bug)",
            )),
        }
    }
}

/// The fan-out of the renewal loop, and what it knows of a cluster between rounds. Made by
/// [`Conn::fanout`].
///
/// On one server: one script per kind and batch, pipelined [`Job::in_flight`] at a time. On a
/// cluster: one script per master, kind and batch (keys of any slot the master serves), each
/// master's batches on their own ([`Job::in_flight`] at a time per master), over a link of the
/// fan-out's own to each master ([`MasterLinks`]), never to another node in its stead; a key a
/// master turns out not to serve (a slot moved since the slot map was read) is sent again in the
/// same pass by a script routed by its slot, as on a cluster before Redis 7. A node that leaves
/// a call unanswered gets no more of that round's calls ([`Silent`]).
pub(crate) struct Fanout {
    conn: Conn,
    /// The masters' slot ranges (`CLUSTER SLOTS`): asked for when missing or stale.
    ranges: Option<Vec<SlotRange>>,
    /// Whether `ranges` are to be read again (a node turned out not to serve a key they gave
    /// it). Until a read succeeds they are used as they are: a read that gets no answer (it went
    /// to a node that stopped answering) must not leave the round without them, or every
    /// master's batches would be one group, behind that node's.
    stale: bool,
    /// Whether holds are renewed with one script per node: where the cluster ran a script with
    /// the cross-slot flag when the client connected (Redis before 7 has no such flag), until a
    /// node refuses one (a node of another version, mid-upgrade): one script per slot from then
    /// on.
    per_node: bool,
    /// The links the per-node scripts go over, one to each master.
    links: MasterLinks,
    /// Whether the next pass reads the map again beside its batches (a master could not be
    /// reached: it may have been failed over).
    recheck: bool,
    /// The nodes that left a call of this round unanswered.
    silent: Silent,
}

/// One call: items of one kind (by their places in the pass's items), and where it goes.
struct Batch {
    items: Vec<usize>,
    /// `Some(slot)`: the per-node script, sent to the master serving `slot`; `None`: the script
    /// with declared keys, routed by them.
    node: Option<u16>,
}

/// Where a call goes: a cluster master (`host`, `port`), or `None` for the one server (or a
/// master not known).
type Node = Option<(String, u16)>;

/// The nodes that left a call of this round unanswered (no answer within the response timeout
/// or [`Job::bound`], or the connection dropped): their other calls of the round are not sent
/// (they would wait just as long, or fail just the same), and the round ends unsuccessful, to be
/// retried. So a master that stops answering costs each round one wait, however many of its
/// holds there are, and holds back no other master's calls.
#[derive(Default)]
struct Silent(std::sync::Mutex<Vec<Node>>);

impl Silent {
    fn contains(&self, node: &Node) -> bool {
        lock(&self.0).contains(node)
    }

    /// Adds `node`; `false` if it was in already.
    fn insert(&self, node: &Node) -> bool {
        let mut silent = lock(&self.0);
        let new = !silent.contains(node);
        if new {
            silent.push(node.clone());
        }
        new
    }

    fn any(&self) -> bool {
        !lock(&self.0).is_empty()
    }
}

/// What became of one pass's calls.
struct Outcome {
    /// Every call got an answer (or was handed on in `retry`).
    ok: bool,
    /// Items a per-node script could not look at (to send again by slot), by their places.
    retry: Vec<usize>,
    /// A per-node script was refused by Redis itself for its cross-slot mark: the refusal.
    refused: Option<String>,
}

impl Fanout {
    /// The response timeout every single command is bounded by.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.conn.response_timeout()
    }

    /// A new round begins: no node has been silent in it yet.
    pub(crate) fn start_round(&mut self) {
        lock(&self.silent.0).clear();
    }

    /// The map as just read; the links to nodes that are not masters any more are closed.
    fn set_ranges(&mut self, ranges: Vec<SlotRange>) {
        self.links
            .retain(|node| ranges.iter().any(|(_, _, master)| master == node));
        self.ranges = Some(ranges);
        self.stale = false;
    }

    /// Sends `job`'s calls for the items of `chunks` (each chunk of one kind and at most a
    /// batch); `false` if any call failed or was not sent (the round is to be retried).
    pub(crate) async fn run<J: Job>(&mut self, job: &J, chunks: &[Vec<J::Item>]) -> bool {
        let conn = self.conn.clone();
        // The items, by their place here: a batch names its items by their places.
        let all: Vec<&J::Item> = chunks.iter().flatten().collect();
        if !conn.is_cluster() {
            // One server: each chunk is a batch.
            let mut start = 0;
            let batches = chunks
                .iter()
                .map(|chunk| {
                    start += chunk.len();
                    Batch {
                        items: (start - chunk.len()..start).collect(),
                        node: None,
                    }
                })
                .collect();
            let groups = vec![(None, batches)];
            return self.send(job, &all, groups).await.ok;
        }
        let key = |at: usize| job.key(all[at]);
        let mut pending: Vec<usize> = (0..all.len()).collect();
        let mut all_ok = true;
        // The map groups the batches by master, in both ways of renewing: without it the per-slot
        // scripts would be one group, and a master that does not answer would hold up the others.
        if (self.ranges.is_none() || self.stale)
            && let Ok(ranges) = conn.cluster_slot_ranges().await
        {
            self.set_ranges(ranges);
        }
        if self.per_node {
            // Read beside the batches, not before them: while a master hangs, the read may wait
            // for it, and the other masters' renewals must not.
            let recheck = std::mem::take(&mut self.recheck);
            let mut fresh = None;
            if let Some(ranges) = &self.ranges {
                let mut by_node =
                    std::collections::BTreeMap::<(&(String, u16), usize), Vec<usize>>::new();
                let mut unplaced = Vec::new();
                for at in pending.drain(..) {
                    let slot = super::cluster::slot(key(at).as_bytes());
                    match master_of(ranges, slot) {
                        Some(node) => by_node
                            .entry((node, job.kind(all[at])))
                            .or_default()
                            .push(at),
                        None => unplaced.push(at),
                    }
                }
                let mut groups: Vec<(Node, Vec<Batch>)> = Vec::new();
                for ((node, _), group) in by_node {
                    let batches = group.chunks(job.batch()).map(|chunk| Batch {
                        node: Some(super::cluster::slot(key(chunk[0]).as_bytes())),
                        items: chunk.to_vec(),
                    });
                    // The map is ordered by node first: a node's kinds are neighbours.
                    match groups.last_mut() {
                        Some((last, all)) if last.as_ref() == Some(node) => all.extend(batches),
                        _ => groups.push((Some(node.clone()), batches.collect())),
                    }
                }
                let read = async {
                    match recheck {
                        true => conn.cluster_slot_ranges().await.ok(),
                        false => None,
                    }
                };
                let (outcome, read) =
                    futures_util::future::join(self.send(job, &all, groups), read).await;
                fresh = read;
                all_ok &= outcome.ok;
                if !outcome.retry.is_empty() || !unplaced.is_empty() {
                    self.stale = true;
                }
                // A master that could not be reached may have been failed over: the retry reads
                // the map again (beside its batches).
                self.recheck = self.silent.any();
                if let Some(refusal) = &outcome.refused {
                    tracing::info!(
                        target: "crosslock",
                        "a cluster master refused the per-master renewal script, which the cluster ran \
                         when this client connected ({refusal}; a node of another version, mid-upgrade?): \
                         renewing one script per slot until this client connects again"
                    );
                    self.per_node = false;
                }
                pending = outcome.retry;
                pending.extend(unplaced);
            }
            if let Some(ranges) = fresh {
                self.set_ranges(ranges);
            }
        }
        if pending.is_empty() {
            return all_ok;
        }
        // One script with declared keys may only touch one slot: a group per slot, and the groups
        // of one master (when the map at hand names it) together.
        let ranges = self.ranges.as_deref();
        let mut by_slot =
            std::collections::BTreeMap::<(Option<&(String, u16)>, u16, usize), Vec<usize>>::new();
        for at in pending {
            let slot = super::cluster::slot(key(at).as_bytes());
            let node = ranges.and_then(|ranges| master_of(ranges, slot));
            by_slot
                .entry((node, slot, job.kind(all[at])))
                .or_default()
                .push(at);
        }
        let mut groups: Vec<(Node, Vec<Batch>)> = Vec::new();
        for ((node, _, _), group) in by_slot {
            let batches = group.chunks(job.batch()).map(|chunk| Batch {
                node: None,
                items: chunk.to_vec(),
            });
            match groups.last_mut() {
                Some((last, all)) if last.as_ref() == node => all.extend(batches),
                _ => groups.push((node.cloned(), batches.collect())),
            }
        }
        let outcome = self.send(job, &all, groups).await;
        all_ok && outcome.ok
    }

    /// Sends each node's batches (of the items in `all`), [`Job::in_flight`] at a time per node
    /// (the multiplexed connection pipelines them; on a cluster each node's go to it, and the
    /// nodes' go on side by side), and settles each answer: handed to the job, or, from a
    /// per-node script, the items to send again by slot. A node's batches after one it left
    /// unanswered are not sent ([`Silent`]).
    async fn send<J: Job>(
        &self,
        job: &J,
        all: &[&J::Item],
        groups: Vec<(Node, Vec<Batch>)>,
    ) -> Outcome {
        let (conn, links, silent) = (&self.conn, &self.links, &self.silent);
        let pass = job.pass();
        let outcome = std::sync::Mutex::new(Outcome {
            ok: true,
            retry: Vec::new(),
            refused: None,
        });
        let (nodes, groups): (Vec<Node>, Vec<_>) = groups.into_iter().unzip();
        let groups = nodes.iter().zip(groups).map(|(node, batches)| {
            let (outcome, pass) = (&outcome, &pass);
            let needs_link = node.is_some() && batches.iter().any(|batch| batch.node.is_some());
            let count: usize = batches.iter().map(|batch| batch.items.len()).sum();
            // A master's link for its per-node scripts, opened once here rather than by each of
            // its batches in flight: one that cannot be reached costs one attempt to connect.
            let ready = async move {
                if let Some(master) = node
                    && needs_link
                    && !silent.contains(node)
                    && let Err(e) = link_ready(job.bound(), conn, links, master).await
                {
                    silent.insert(node);
                    job.failed(count, Some(&address(master)), &e, false);
                    // Kept: the retry (or the local deadline) settles them.
                    lock(outcome).ok = false;
                    return false;
                }
                true
            };
            // Each batch's call is made only when it is its turn, so the futures alive at once
            // (each with its command and arguments) are at most `in_flight` per node whatever
            // the number of items; and it is not sent once the node left one unanswered.
            let to = To {
                conn,
                links,
                silent,
                node,
            };
            let calls = batches
                .into_iter()
                .map(move |batch| call_one(job, pass, to, all, batch));
            (ready, calls)
        });
        // Each answer is settled as it comes (and let go of), not gathered for the end.
        per_group(job.in_flight(), groups, |(node, batch, answer)| {
            let mut outcome = lock(&outcome);
            match answer {
                // Not sent: sent by the retry of the round.
                None => outcome.ok = false,
                Some(answer) => {
                    // Told once per node and round: its other failures are the same one.
                    let mut first = true;
                    if matches!(&answer.1, Err(e) if e.kind() == ErrorKind::Unavailable) {
                        first = silent.insert(node);
                    }
                    settle(job, all, batch, answer, node, first, &mut outcome);
                }
            }
        })
        .await;
        outcome.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where a group's calls go, and what they share.
struct To<'f> {
    conn: &'f Conn,
    links: &'f MasterLinks,
    silent: &'f Silent,
    node: &'f Node,
}

impl Clone for To<'_> {
    fn clone(&self) -> Self {
        *self
    }
}

impl Copy for To<'_> {}

/// What a call ends with: its node, its batch, and when it was sent and its answer (`None`: not
/// sent).
type Answered<'f> = (&'f Node, Batch, Option<(Instant, Result<Vec<i64>>)>);

/// Makes the call of `batch` (of the items in `all`), unless its node left one of this round
/// unanswered.
async fn call_one<'f, J: Job>(
    job: &'f J,
    pass: &'f J::Pass,
    to: To<'f>,
    all: &'f [&'f J::Item],
    batch: Batch,
) -> Answered<'f> {
    if to.silent.contains(to.node) {
        return (to.node, batch, None);
    }
    let items: Vec<&J::Item> = batch.items.iter().map(|&at| all[at]).collect();
    let keys: Vec<&str> = items.iter().map(|item| job.key(item)).collect();
    let call = Call {
        conn: to.conn,
        links: to.links,
        master: to.node,
        node: batch.node,
        keys: &keys,
    };
    let answer = job.send(pass, call, &items).await;
    (to.node, batch, Some(answer))
}

/// Settles one call's answer: handed to the job, or (from a per-node script) the items to send
/// again by slot handed on in `outcome`. A failure is told to the job, `again` unless `first`.
fn settle<J: Job>(
    job: &J,
    all: &[&J::Item],
    batch: Batch,
    (sent, result): (Instant, Result<Vec<i64>>),
    node: &Node,
    first: bool,
    outcome: &mut Outcome,
) {
    let flags = match result {
        Ok(flags) => flags,
        Err(e) if batch.node.is_some() && e.kind() != ErrorKind::Unavailable => {
            // Redis itself refused the per-node script: these items are sent by slot.
            tracing::debug!(target: "crosslock", "per-node renewal refused: {e}");
            let message = e.to_string();
            if crate::scripts::refuses_cross_slot_mark(&message) {
                outcome.refused = Some(message);
            }
            outcome.retry.extend(batch.items);
            return;
        }
        Err(e) => {
            // Kept: the retry (or the local deadline) settles them.
            let master = node.as_ref().map(address);
            job.failed(batch.items.len(), master.as_deref(), &e, !first);
            outcome.ok = false;
            return;
        }
    };
    let mut items = Vec::with_capacity(batch.items.len());
    if batch.node.is_none() {
        items.extend(batch.items.iter().map(|&at| all[at]));
        job.answered(items, sent, flags);
        return;
    }
    // A key the node does not serve: -1 (see `scripts::node_script!`).
    let mut kept = Vec::with_capacity(flags.len());
    for (at, flag) in batch.items.into_iter().zip(flags) {
        match flag {
            -1 => outcome.retry.push(at),
            _ => {
                items.push(all[at]);
                kept.push(flag);
            }
        }
    }
    job.answered(items, sent, kept);
}

/// The master serving `slot` in `ranges`, if any.
fn master_of(ranges: &[SlotRange], slot: u16) -> Option<&(String, u16)> {
    ranges
        .iter()
        .find(|(first, last, _)| (*first..=*last).contains(&slot))
        .map(|(_, _, node)| node)
}

/// `host:port` of `master`.
fn address((host, port): &(String, u16)) -> String {
    crate::transport::endpoint::host_port(host, *port)
}

/// Makes sure `links` has a link to `master`, waiting no longer than `bound` (a renewal's wait
/// for its answer): a master that accepts connections but does not answer (a paused process)
/// must not hold up the next round of the others.
async fn link_ready(
    bound: Duration,
    conn: &Conn,
    links: &MasterLinks,
    master: &(String, u16),
) -> Result<()> {
    match tokio::time::timeout(bound, links.ready(conn, master)).await {
        Ok(ready) => ready,
        Err(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "no connection to the master within {:.3}s (a renewal period, or the response \
                 timeout if shorter)",
                bound.as_secs_f64()
            ),
        )),
    }
}
