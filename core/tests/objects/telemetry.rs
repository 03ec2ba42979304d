//! Telemetry: every wait and every hold is told to the client's recorder, begun and ended in
//! pairs, with the outcome and the reason a user reads on a dashboard; so are the watchdog's
//! rounds, the subscriptions (up and down, down at the latest at close) and the connections'
//! losses and returns; with the feature
//! `opentelemetry`, the same as OpenTelemetry metrics, read back through the SDK's in-memory
//! exporter.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crosslock::telemetry::{
    ConnectionChange, ConnectionRole, Event, HoldEnd, ObjectType, SpanData, SpanExporter, SpanKind,
    SpanLevel, SpanParent, SpanValue, Telemetry, WaitOutcome, WakeCause, with_span_parent,
};
use crosslock::{AcquireOptions, Client, ClientOptions, LockKind, LostReason, Owner};
use support::{RedisServer, until};

/// An event as the test keeps it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    WaitBegan(ObjectType, String),
    WaitEnded(ObjectType, String, WaitOutcome, Duration),
    HoldBegan(ObjectType, String),
    HoldEnded(ObjectType, String, HoldEnd, Duration),
    Woken(WakeCause),
    /// Renewed, gone, failed.
    Round(u32, u32, u32),
    Subscribed,
    Unsubscribed,
    Connection(ConnectionChange, ConnectionRole),
}

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Seen>>>);

impl Events {
    fn telemetry(&self) -> Telemetry {
        let events = self.0.clone();
        Telemetry::from_fn(move |event: &Event<'_>| {
            let seen = match *event {
                Event::WaitBegan { object, name } => Seen::WaitBegan(object, name.into()),
                Event::WaitEnded {
                    object,
                    name,
                    outcome,
                    waited,
                } => Seen::WaitEnded(object, name.into(), outcome, waited),
                Event::HoldBegan { object, name } => Seen::HoldBegan(object, name.into()),
                Event::HoldEnded {
                    object,
                    name,
                    held,
                    end,
                } => Seen::HoldEnded(object, name.into(), end, held),
                Event::Woken { cause } => Seen::Woken(cause),
                Event::RenewalRound {
                    renewed,
                    gone,
                    failed,
                    ..
                } => Seen::Round(renewed, gone, failed),
                Event::Subscribed => Seen::Subscribed,
                Event::Unsubscribed => Seen::Unsubscribed,
                Event::Connection { change, role } => Seen::Connection(change, role),
                _ => return,
            };
            events.lock().unwrap().push(seen);
        })
    }

    /// Every wait and hold event so far; the others are taken too.
    fn take(&self) -> Vec<Seen> {
        let mut seen = std::mem::take(&mut *self.0.lock().unwrap());
        seen.retain(|e| {
            matches!(
                e,
                Seen::WaitBegan(..)
                    | Seen::WaitEnded(..)
                    | Seen::HoldBegan(..)
                    | Seen::HoldEnded(..)
            )
        });
        seen
    }

    /// How many events so far are `what`.
    fn count(&self, what: impl Fn(&Seen) -> bool) -> usize {
        self.0.lock().unwrap().iter().filter(|e| what(e)).count()
    }

    /// The watchdog rounds so far: renewed, gone, failed, summed.
    fn rounds(&self) -> (usize, u32, u32, u32) {
        let events = self.0.lock().unwrap();
        let mut out = (0, 0, 0, 0);
        for e in events.iter() {
            if let Seen::Round(renewed, gone, failed) = e {
                out = (out.0 + 1, out.1 + renewed, out.2 + gone, out.3 + failed);
            }
        }
        out
    }

    /// Channels subscribed now, by what was told.
    fn subscribed(&self) -> i64 {
        self.count(|e| *e == Seen::Subscribed) as i64
            - self.count(|e| *e == Seen::Unsubscribed) as i64
    }

    fn wakeups(&self, cause: WakeCause) -> usize {
        let events = self.0.lock().unwrap();
        events.iter().filter(|e| **e == Seen::Woken(cause)).count()
    }

    /// Waiting and held now, by what began and has not ended.
    fn in_progress(&self) -> (i64, i64) {
        let events = self.0.lock().unwrap();
        let (mut waiting, mut held) = (0, 0);
        for e in events.iter() {
            match e {
                Seen::WaitBegan(..) => waiting += 1,
                Seen::WaitEnded(..) => waiting -= 1,
                Seen::HoldBegan(..) => held += 1,
                Seen::HoldEnded(..) => held -= 1,
                _ => {}
            }
        }
        (waiting, held)
    }
}

async fn client_telling(server: &RedisServer, events: &Events, watchdog: Duration) -> Client {
    let options = ClientOptions::new()
        .watchdog_timeout(watchdog)
        .telemetry(events.telemetry());
    Client::connect_with(&server.url(), options).await.unwrap()
}

const LOCK: ObjectType = ObjectType::Lock(LockKind::Lock);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_wait_and_a_re_entrant_hold_are_told_once_each() {
    let server = RedisServer::start();
    let events = Events::default();
    let client = client_telling(&server, &events, Duration::from_secs(30)).await;
    let other = Client::connect(&server.url()).await.unwrap();
    let theirs = other.lock("orders:1").unwrap();
    let held_by_them = theirs.acquire().await.unwrap();

    let lock = client.lock("orders:1").unwrap();
    let owner = Owner::unique();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_as(owner, &AcquireOptions::new()).await })
    };
    until("the waiter to be told waiting", async || {
        events.in_progress() == (1, 0)
    })
    .await;
    until("the waiter to subscribe", async || {
        server.subscribers("redisson_lock__channel:{orders:1}") == 1
    })
    .await;
    // It waits at least as long as the other holder keeps the lock from here, and by then it
    // waits for the release's message.
    tokio::time::sleep(Duration::from_millis(200)).await;
    held_by_them.release().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
    assert_eq!(events.wakeups(WakeCause::Message), 1, "{:?}", events.0);
    // A re-entrant acquire and its release begin and end nothing.
    assert!(
        lock.acquire_as(owner, &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(!lock.release_as(owner).await.unwrap());
    assert_eq!(events.in_progress(), (0, 1), "{:?}", events.0);
    assert!(lock.release_as(owner).await.unwrap());

    let seen = events.take();
    let name = "orders:1".to_owned();
    assert!(
        matches!(&seen[..], [
            Seen::WaitBegan(LOCK, n1),
            Seen::HoldBegan(LOCK, n2),
            Seen::WaitEnded(LOCK, n3, WaitOutcome::Acquired, waited),
            Seen::WaitBegan(LOCK, _),
            Seen::WaitEnded(LOCK, _, WaitOutcome::Acquired, _),
            Seen::HoldEnded(LOCK, n4, HoldEnd::Released, _),
        ] if [n1, n2, n3, n4].iter().all(|n| **n == name)
            && *waited >= Duration::from_millis(200)),
        "{seen:#?}"
    );
    client.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_cancels_and_every_waiting_object_type_are_told() {
    let server = RedisServer::start();
    let events = Events::default();
    let client = client_telling(&server, &events, Duration::from_secs(30)).await;
    let other = Client::connect(&server.url()).await.unwrap();
    let _held = other.lock("busy").unwrap().acquire().await.unwrap();

    let lock = client.lock("busy").unwrap();
    let short = AcquireOptions::new().wait(Duration::from_millis(100));
    assert!(!lock.acquire_as(Owner::unique(), &short).await.unwrap());
    // A caller that drops its acquire is a cancelled wait.
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        lock.acquire_as(Owner::unique(), &AcquireOptions::new()),
    )
    .await;
    assert!(dropped.is_err());
    // An owner-less object's wait, and a latch's.
    let pool = client.semaphore("pool").unwrap();
    assert!(
        !pool
            .try_acquire(1, Duration::from_millis(50))
            .await
            .unwrap()
    );
    pool.try_set_permits(1).await.unwrap();
    assert!(pool.try_acquire(1, Duration::ZERO).await.unwrap());
    let latch = client.count_down_latch("batch").unwrap();
    latch.try_set_count(1).await.unwrap();
    assert!(!latch.open_within(short.clone()).await.unwrap());
    let permits = client.permit_expirable_semaphore("slots").unwrap();
    permits.try_set_permits(1).await.unwrap();
    let permit = permits
        .try_acquire(AcquireOptions::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(events.in_progress(), (0, 1));
    permit.release().await.unwrap();
    // A spin lock waits by backing off, each step a wake-up.
    let spin = client.spin_lock("busy").unwrap();
    let longer = AcquireOptions::new().wait(Duration::from_millis(300));
    assert!(!spin.acquire_as(Owner::unique(), &longer).await.unwrap());
    assert!(events.wakeups(WakeCause::Backoff) > 0, "{:?}", events.0);

    let ended: Vec<(ObjectType, WaitOutcome)> = events
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Seen::WaitEnded(object, _, outcome, _) => Some((object, outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        [
            (LOCK, WaitOutcome::Timeout),
            (LOCK, WaitOutcome::Cancelled),
            (ObjectType::Semaphore, WaitOutcome::Timeout),
            (ObjectType::Semaphore, WaitOutcome::Acquired),
            (ObjectType::CountDownLatch, WaitOutcome::Timeout),
            (ObjectType::PermitExpirableSemaphore, WaitOutcome::Acquired),
            (ObjectType::Lock(LockKind::SpinLock), WaitOutcome::Timeout),
        ]
    );
    assert_eq!(events.in_progress(), (0, 0));

    // A composite's wait is its own type's (its parts' tries are their own types' too).
    let free = || client.lock("free").unwrap().erased();
    let busy = || client.lock("busy").unwrap().erased();
    let both = crosslock::MultiLock::new(vec![free(), busy()]).unwrap();
    assert!(both.try_acquire(short.clone()).await.unwrap().is_none());
    let majority = crosslock::RedLock::new(vec![free(), busy(), free()]).unwrap();
    majority
        .try_acquire(short)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    let composites: Vec<(ObjectType, String, WaitOutcome)> = events
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Seen::WaitEnded(object, name, outcome, _) if !matches!(object, ObjectType::Lock(_)) => {
                Some((object, name, outcome))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        composites,
        [
            (
                ObjectType::MultiLock,
                "'free', 'busy'".to_owned(),
                WaitOutcome::Timeout
            ),
            (
                ObjectType::RedLock,
                "'free', 'busy', 'free'".to_owned(),
                WaitOutcome::Acquired
            ),
        ]
    );
    assert_eq!(events.in_progress(), (0, 0));
    client.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_hold_ends_once_with_its_reason_and_its_release_ends_nothing_more() {
    let server = RedisServer::start();
    let events = Events::default();
    // Renewed every second: the force-unlock is found by a renewal, well before the lease's end.
    let client = client_telling(&server, &events, Duration::from_secs(3)).await;
    let lock = client.lock("orders:2").unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    until("the renewal to find the hold gone", async || {
        guard.is_lost()
    })
    .await;
    assert!(guard.release().await.is_err());
    // A lease that runs out is lost as expired.
    let leased = client.lock("orders:3").unwrap();
    let options = AcquireOptions::new().lease(Duration::from_millis(200));
    let owner = Owner::unique();
    assert!(leased.acquire_as(owner, &options).await.unwrap());
    until("the lease to run out", async || leased.is_lost(owner)).await;

    let ended: Vec<(String, HoldEnd)> = events
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Seen::HoldEnded(_, name, end, _) => Some((name, end)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ended,
        [
            ("orders:2".to_owned(), HoldEnd::Lost(LostReason::Gone)),
            ("orders:3".to_owned(), HoldEnd::Lost(LostReason::Expired)),
        ]
    );
    assert_eq!(events.in_progress(), (0, 0));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_still_held_at_close_end_as_released() {
    let server = RedisServer::start();
    let events = Events::default();
    let client = client_telling(&server, &events, Duration::from_secs(30)).await;
    let _guard = client.fair_lock("report").unwrap().acquire().await.unwrap();
    assert_eq!(events.in_progress(), (0, 1));
    client.close().await;
    assert_eq!(events.in_progress(), (0, 0));
    assert!(matches!(
        events.take().last(),
        Some(Seen::HoldEnded(
            ObjectType::Lock(LockKind::FairLock),
            _,
            HoldEnd::Released,
            _
        ))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_rounds_are_told_with_what_they_renewed_and_found_gone() {
    let server = RedisServer::start();
    let events = Events::default();
    // A round every 200 ms.
    let client = client_telling(&server, &events, Duration::from_millis(600)).await;
    let lock = client.lock("renewed").unwrap();
    let guard = lock.acquire().await.unwrap();
    until("a round to renew the hold", async || events.rounds().1 >= 1).await;
    assert_eq!(events.rounds().2, 0, "nothing was gone yet");
    lock.force_unlock().await.unwrap();
    until("a round to find it gone", async || events.rounds().2 == 1).await;
    assert!(guard.is_lost());
    let (rounds, renewed, gone, failed) = events.rounds();
    assert!(rounds >= 2 && renewed >= 1, "{:?}", events.rounds());
    assert_eq!((gone, failed), (1, 0));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_told_up_and_down_and_down_at_close() {
    let server = RedisServer::start();
    let events = Events::default();
    let client = client_telling(&server, &events, Duration::from_secs(30)).await;
    let lock = client.lock("queue").unwrap();
    let guard = lock.acquire().await.unwrap();
    // A second owner waits: its channel is subscribed.
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let owner = Owner::unique();
            assert!(
                lock.acquire_as(owner, &AcquireOptions::new())
                    .await
                    .unwrap()
            );
            assert!(lock.release_as(owner).await.unwrap());
        })
    };
    until("the waiter's subscription", async || {
        events.subscribed() == 1
    })
    .await;
    guard.release().await.unwrap();
    waiter.await.unwrap();
    // The channel is left (at once, or a moment later when kept for the next waiter).
    until("the channel left", async || events.subscribed() == 0).await;
    assert_eq!(events.count(|e| *e == Seen::Subscribed), 1);

    // A waiter still subscribed when the client closes: its subscription ends with the client.
    let semaphore = client.semaphore("empty").unwrap();
    let waiting = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    until("the semaphore waiter's subscription", async || {
        events.subscribed() == 1
    })
    .await;
    client.close().await;
    assert!(
        waiting.await.unwrap().is_err(),
        "a closed client's wait ends"
    );
    until("every subscription told ended", async || {
        events.subscribed() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_woken_by_its_subscription_coming_back_is_told_so() {
    let server = RedisServer::start();
    let events = Events::default();
    let client = client_telling(&server, &events, Duration::from_secs(30)).await;
    let lock = client.lock("dropped").unwrap();
    let guard = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire_as(Owner::unique(), &AcquireOptions::new())
                .await
        })
    };
    until("the waiter's subscription", async || {
        events.subscribed() == 1
    })
    .await;
    until("the server to count it", async || {
        server.subscribers("redisson_lock__channel:{dropped}") == 1
    })
    .await;
    // The server drops the subscription connection: back, it wakes every waiter to try again.
    server.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    until("a reconnect wake-up", async || {
        events.wakeups(WakeCause::Reconnect) >= 1
    })
    .await;
    // Nothing was published: none of the wake-ups was a message's.
    assert_eq!(events.wakeups(WakeCause::Message), 0, "{:?}", events.0);
    guard.release().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_and_back_is_told_once_each() {
    let mut server = RedisServer::start();
    let port = server.port;
    let events = Events::default();
    let options = ClientOptions::new()
        .connect_timeout(Duration::from_secs(10))
        .telemetry(events.telemetry());
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let lock = client.lock("outage").unwrap();
    lock.acquire().await.unwrap().release().await.unwrap();
    assert_eq!(events.count(|e| matches!(e, Seen::Connection(..))), 0);
    server.kill();
    // A command finds it down; the client reconnects once Redis is back.
    assert!(lock.is_locked().await.is_err());
    let _server = RedisServer::start_on(port);
    until("the command connection back", async || {
        lock.is_locked().await.is_ok()
    })
    .await;
    let command = |change| Seen::Connection(change, ConnectionRole::Command);
    assert_eq!(events.count(|e| *e == command(ConnectionChange::Lost)), 1);
    assert_eq!(events.count(|e| *e == command(ConnectionChange::Back)), 1);
    client.close().await;
}

/// The same events as OpenTelemetry metrics, read back through the SDK.
/// Ended spans as a host's exporter gets them.
#[derive(Clone, Default)]
struct Exported(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Exported {
    fn export(&self, span: SpanData) {
        self.0.lock().unwrap().push(span);
    }
}

fn attribute<'s>(span: &'s SpanData, key: &str) -> Option<&'s SpanValue> {
    span.attributes
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_s_exporter_gets_each_acquire_with_its_caller_s_span_and_every_attempt() {
    let server = RedisServer::start();
    let exported = Exported::default();
    let telemetry = Telemetry::from_fn(|_: &Event<'_>| {}).with_spans(
        exported.clone(),
        SpanLevel::Acquires,
        true,
    );
    let options = ClientOptions::new().telemetry(telemetry);
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    // Held elsewhere for 300 ms: the acquire waits (in a task of its own) and tries again.
    let leased = AcquireOptions::new().lease(Duration::from_millis(300));
    assert!(
        other
            .lock("orders:7")
            .unwrap()
            .acquire_as(Owner::unique(), &leased)
            .await
            .unwrap()
    );
    let lock = client.lock("orders:7").unwrap();
    let request = SpanParent::new("request 7");
    let guard = with_span_parent(request, lock.acquire()).await.unwrap();
    guard.release().await.unwrap();

    let spans = std::mem::take(&mut *exported.0.lock().unwrap());
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let acquire = &spans[0];
    assert_eq!(acquire.name, "crosslock.acquire");
    assert_eq!(acquire.kind, SpanKind::Internal);
    let parent = acquire.parent.as_ref().expect("the caller's span");
    assert_eq!(parent.downcast_ref::<&str>(), Some(&"request 7"));
    assert_eq!(
        attribute(acquire, "crosslock.lock.name"),
        Some(&SpanValue::Str("orders:7".into()))
    );
    assert_eq!(
        attribute(acquire, "crosslock.outcome"),
        Some(&SpanValue::Str("acquired".into()))
    );
    let Some(SpanValue::Int(attempts)) = attribute(acquire, "crosslock.attempts") else {
        panic!("{acquire:#?}")
    };
    // The first attempt inline and at least one from the waiting task, each a child.
    assert!(*attempts >= 2, "{acquire:#?}");
    assert_eq!(acquire.children.len() as i64, *attempts);
    for call in &acquire.children {
        assert_eq!(call.name, "EVALSHA lock/acquire");
        assert_eq!(call.kind, SpanKind::Client);
        assert!(call.parent.is_none());
        assert!(acquire.start <= call.start && call.end <= acquire.end);
    }
    assert!(acquire.end.duration_since(acquire.start).unwrap() >= Duration::from_millis(250));
    client.close().await;
    other.close().await;
}

#[cfg(feature = "opentelemetry")]
mod opentelemetry_metrics {
    use super::*;

    use opentelemetry::KeyValue;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    use crosslock::telemetry::OpenTelemetry;

    struct Sdk {
        provider: SdkMeterProvider,
        exporter: InMemoryMetricExporter,
    }

    impl Sdk {
        fn new() -> Self {
            let exporter = InMemoryMetricExporter::default();
            let provider = SdkMeterProvider::builder()
                .with_reader(PeriodicReader::builder(exporter.clone()).build())
                .build();
            Sdk { provider, exporter }
        }

        fn last(&self) -> ResourceMetrics {
            self.provider.force_flush().unwrap();
            self.exporter.get_finished_metrics().unwrap().pop().unwrap()
        }
    }

    /// Attribute pairs, sorted.
    type Attributes = Vec<(String, String)>;

    fn attributes<'a>(points: impl Iterator<Item = &'a KeyValue>) -> Attributes {
        let mut out: Attributes = points
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        out.sort();
        out
    }

    fn pairs(list: &[(&str, &str)]) -> Attributes {
        let mut out: Attributes = list
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        out.sort();
        out
    }

    /// Every data point of the instrument `name`: its attributes and its value (a sum's value,
    /// a histogram's count), with the instrument's unit.
    fn points(metrics: &ResourceMetrics, name: &str) -> (String, Vec<(Attributes, f64)>) {
        let metric = metrics
            .scope_metrics()
            .flat_map(|s| s.metrics())
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("no instrument {name}"));
        let values = match metric.data() {
            AggregatedMetrics::F64(MetricData::Histogram(h)) => h
                .data_points()
                .map(|p| (attributes(p.attributes()), p.count() as f64))
                .collect(),
            AggregatedMetrics::I64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| (attributes(p.attributes()), p.value() as f64))
                .collect(),
            AggregatedMetrics::U64(MetricData::Sum(s)) => s
                .data_points()
                .map(|p| (attributes(p.attributes()), p.value() as f64))
                .collect(),
            other => panic!("{name}: unexpected data {other:?}"),
        };
        (metric.unit().to_owned(), values)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waits_holds_and_losses_are_metrics_with_their_units_and_attributes() {
        let server = RedisServer::start();
        let sdk = Sdk::new();
        let meter = sdk.provider.meter("test");
        let options = ClientOptions::new()
            .watchdog_timeout(Duration::from_secs(3))
            .telemetry(OpenTelemetry::new(&meter).into());
        let client = Client::connect_with(&server.url(), options).await.unwrap();
        let lock = client.lock("orders:9").unwrap();
        let guard = lock.acquire().await.unwrap();
        // Held now, and a second owner's wait times out.
        let short = AcquireOptions::new().wait(Duration::from_millis(50));
        assert!(!lock.acquire_as(Owner::unique(), &short).await.unwrap());
        let metrics = sdk.last();
        let lock_type = ("crosslock.object.type", "lock");
        assert_eq!(
            points(&metrics, "crosslock.lock.held"),
            ("{hold}".to_owned(), vec![(pairs(&[lock_type]), 1.0)])
        );
        let (unit, mut waits) = points(&metrics, "crosslock.lock.wait.duration");
        waits.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(unit, "s");
        assert_eq!(
            waits,
            vec![
                (pairs(&[lock_type, ("crosslock.outcome", "acquired")]), 1.0),
                (pairs(&[lock_type, ("crosslock.outcome", "timeout")]), 1.0),
            ]
        );
        assert_eq!(
            points(&metrics, "crosslock.lock.waiters").1,
            vec![(pairs(&[lock_type]), 0.0)]
        );

        // A spin lock's back-off steps are wake-ups.
        let spin = client.spin_lock("orders:9").unwrap();
        let longer = AcquireOptions::new().wait(Duration::from_millis(300));
        assert!(!spin.acquire_as(Owner::unique(), &longer).await.unwrap());
        let (unit, wakeups) = points(&sdk.last(), "crosslock.wait.wakeups");
        assert_eq!(unit, "{wakeup}");
        assert!(
            wakeups
                .iter()
                .any(|(a, n)| *a == pairs(&[("crosslock.wake.cause", "backoff")]) && *n > 0.0),
            "{wakeups:?}"
        );

        // Lost to a force-unlock: counted by reason, the hold time recorded as ended by loss.
        lock.force_unlock().await.unwrap();
        until("the renewal to find the hold gone", async || {
            guard.is_lost()
        })
        .await;
        let metrics = sdk.last();
        assert_eq!(
            points(&metrics, "crosslock.lock.lost"),
            (
                "{hold}".to_owned(),
                vec![(pairs(&[lock_type, ("crosslock.lost.reason", "gone")]), 1.0)]
            )
        );
        assert_eq!(
            points(&metrics, "crosslock.lock.hold.duration"),
            (
                "s".to_owned(),
                vec![(pairs(&[lock_type, ("crosslock.hold.end", "lost")]), 1.0)]
            )
        );
        assert_eq!(
            points(&metrics, "crosslock.lock.held").1,
            vec![(pairs(&[lock_type]), 0.0)]
        );
        // The round that found it gone, counted by outcome, and timed.
        let (unit, renewals) = points(&metrics, "crosslock.watchdog.renewals");
        assert_eq!(unit, "{hold}");
        assert!(
            renewals.contains(&(pairs(&[("crosslock.renewal.outcome", "gone")]), 1.0)),
            "{renewals:?}"
        );
        let (unit, rounds) = points(&metrics, "crosslock.watchdog.renewal.duration");
        assert_eq!(unit, "s");
        assert!(
            rounds.len() == 1 && rounds[0].0.is_empty() && rounds[0].1 >= 1.0,
            "{rounds:?}"
        );
        client.close().await;
        // Closed: no subscription is left counted.
        let (unit, subscriptions) = points(&sdk.last(), "crosslock.pubsub.subscriptions");
        assert_eq!(unit, "{subscription}");
        assert_eq!(subscriptions, vec![(vec![], 0.0)]);
    }

    mod spans {
        use super::*;

        use opentelemetry::trace::{SpanKind, TraceContextExt, Tracer as _, TracerProvider as _};
        use opentelemetry::{Context, context::FutureExt as _};
        use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};

        use crosslock::telemetry::SpanLevel;

        struct Traces {
            provider: SdkTracerProvider,
            exporter: InMemorySpanExporter,
        }

        impl Traces {
            fn new() -> Self {
                let exporter = InMemorySpanExporter::default();
                let provider = SdkTracerProvider::builder()
                    .with_simple_exporter(exporter.clone())
                    .build();
                Traces { provider, exporter }
            }

            fn client_options(&self, level: SpanLevel) -> ClientOptions {
                let meter = opentelemetry::global::meter("test");
                let recorder =
                    OpenTelemetry::new(&meter).with_tracer(self.provider.tracer("test"), level);
                ClientOptions::new().telemetry(recorder.into())
            }

            fn finished(&self) -> Vec<SpanData> {
                self.exporter.get_finished_spans().unwrap()
            }
        }

        fn attribute(span: &SpanData, key: &str) -> Option<String> {
            span.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.to_string())
        }

        fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
            spans.iter().filter(|s| s.name == name).collect()
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn an_acquire_is_a_span_under_the_callers_with_its_script_calls_under_it() {
            let server = RedisServer::start();
            let traces = Traces::new();
            let options = traces.client_options(SpanLevel::Acquires);
            let client = Client::connect_with(&server.url(), options).await.unwrap();
            let lock = client.lock("orders:5").unwrap();
            // The caller's span: the acquire's parent.
            let request = traces.provider.tracer("app").start("handle request");
            let cx = Context::current_with_span(request);
            let request_id = cx.span().span_context().span_id();
            let guard = lock.acquire().with_context(cx.clone()).await.unwrap();
            let short = AcquireOptions::new().wait(Duration::from_millis(50));
            let busy = lock
                .acquire_as(Owner::unique(), &short)
                .with_context(cx.clone());
            assert!(!busy.await.unwrap());
            guard.release().with_context(cx.clone()).await.unwrap();
            cx.span().end();

            let spans = traces.finished();
            let acquires = named(&spans, "crosslock.acquire");
            assert_eq!(acquires.len(), 2, "{spans:#?}");
            for (acquire, outcome) in acquires.iter().zip(["acquired", "timeout"]) {
                assert_eq!(acquire.parent_span_id, request_id);
                assert_eq!(acquire.span_kind, SpanKind::Internal);
                assert_eq!(attribute(acquire, "crosslock.object.type").unwrap(), "lock");
                assert_eq!(attribute(acquire, "crosslock.outcome").unwrap(), outcome);
                assert!(attribute(acquire, "crosslock.lock.name").is_none());
                let attempts: i64 = attribute(acquire, "crosslock.attempts")
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(attempts >= 1, "{acquire:?}");
                // Its script calls are client spans under it, one per attempt.
                let id = acquire.span_context.span_id();
                let calls: Vec<_> = spans.iter().filter(|s| s.parent_span_id == id).collect();
                assert_eq!(calls.len() as i64, attempts, "{calls:#?}");
                for call in calls {
                    assert_eq!(call.name, "EVALSHA lock/acquire");
                    assert_eq!(call.span_kind, SpanKind::Client);
                    assert_eq!(attribute(call, "db.system.name").unwrap(), "redis");
                    assert_eq!(attribute(call, "db.operation.name").unwrap(), "EVALSHA");
                    assert_eq!(attribute(call, "server.address").unwrap(), "127.0.0.1");
                    assert_eq!(
                        attribute(call, "server.port").unwrap(),
                        server.port.to_string()
                    );
                }
            }
            // At this level, a release is no span and neither are its script calls.
            assert!(named(&spans, "crosslock.release").is_empty());
            assert!(
                named(&spans, "EVALSHA lock/release").is_empty(),
                "{spans:#?}"
            );
            client.close().await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn at_the_all_level_releases_and_watchdog_rounds_are_spans_too() {
            let server = RedisServer::start();
            let traces = Traces::new();
            let options = traces
                .client_options(SpanLevel::All)
                .watchdog_timeout(Duration::from_millis(600));
            let client = Client::connect_with(&server.url(), options).await.unwrap();
            let guard = client.lock("orders:6").unwrap().acquire().await.unwrap();
            until("a watchdog round's span", async || {
                named(&traces.finished(), "crosslock.renewal")
                    .iter()
                    .any(|r| attribute(r, "crosslock.renewal.renewed").as_deref() == Some("1"))
            })
            .await;
            guard.release().await.unwrap();
            let spans = traces.finished();
            let rounds = named(&spans, "crosslock.renewal");
            let round = rounds
                .iter()
                .find(|r| attribute(r, "crosslock.renewal.renewed").as_deref() == Some("1"))
                .unwrap();
            let id = round.span_context.span_id();
            assert!(
                spans
                    .iter()
                    .any(|s| s.parent_span_id == id && s.name == "EVALSHA renewal/hash"),
                "{spans:#?}"
            );
            let release = named(&spans, "crosslock.release");
            assert_eq!(release.len(), 1);
            let id = release[0].span_context.span_id();
            assert!(
                spans
                    .iter()
                    .any(|s| s.parent_span_id == id && s.name == "EVALSHA lock/release"),
                "{spans:#?}"
            );
            client.close().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lock_names_are_attributes_only_when_asked_for() {
        let server = RedisServer::start();
        for names in [false, true] {
            let sdk = Sdk::new();
            let meter = sdk.provider.meter("test");
            let recorder = OpenTelemetry::new(&meter).with_lock_names(names);
            let options = ClientOptions::new().telemetry(recorder.into());
            let client = Client::connect_with(&server.url(), options).await.unwrap();
            client
                .lock("named")
                .unwrap()
                .acquire()
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
            let (_, points) = points(&sdk.last(), "crosslock.lock.hold.duration");
            let named = points[0]
                .0
                .iter()
                .any(|(k, v)| k == "crosslock.lock.name" && v == "named");
            assert_eq!(named, names, "{points:?}");
            client.close().await;
        }
    }
}
