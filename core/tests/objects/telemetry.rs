//! Telemetry: every wait and every hold is told to the client's recorder, begun and ended in
//! pairs, with the outcome and the reason a user reads on a dashboard; with the feature
//! `opentelemetry`, the same as OpenTelemetry metrics, read back through the SDK's in-memory
//! exporter.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crosslock::telemetry::{Event, HoldEnd, ObjectType, Telemetry, WaitOutcome, WakeCause};
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
                _ => return,
            };
            events.lock().unwrap().push(seen);
        })
    }

    /// Every event so far but the wake-ups, which are taken too.
    fn take(&self) -> Vec<Seen> {
        let mut seen = std::mem::take(&mut *self.0.lock().unwrap());
        seen.retain(|e| !matches!(e, Seen::Woken(_)));
        seen
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
                Seen::Woken(_) => {}
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
    let owner = Owner::new(3);
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
    assert!(!lock.acquire_as(Owner::new(1), &short).await.unwrap());
    // A caller that drops its acquire is a cancelled wait.
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        lock.acquire_as(Owner::new(2), &AcquireOptions::new()),
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
    assert!(!spin.acquire_as(Owner::new(3), &longer).await.unwrap());
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
    let owner = Owner::new(5);
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

/// The same events as OpenTelemetry metrics, read back through the SDK.
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
        assert!(!lock.acquire_as(Owner::new(77), &short).await.unwrap());
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
        assert!(!spin.acquire_as(Owner::new(78), &longer).await.unwrap());
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
        client.close().await;
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
