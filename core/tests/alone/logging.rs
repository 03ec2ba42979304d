//! Logging: core reports reconnects, renewal failures, lost locks and subscription changes as
//! `tracing` events under the target `crosslock`, and never a credential.
//!
//! In a process of its own (`alone!`): the test installs the process's global `tracing` subscriber
//! (there is one per process, set once), and it would capture the events of every test beside it.

use crate::support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, ClientOptions, Owner};
use support::RedisServer;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// Every event seen: (level, target, message).
static EVENTS: Mutex<Vec<(tracing::Level, String, String)>> = Mutex::new(Vec::new());

struct Capture;

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let message = crosslock::ffi::event_text(event);
        EVENTS
            .lock()
            .unwrap()
            .push((*meta.level(), meta.target().to_owned(), message));
    }
}

fn wait_for_event(what: &str, matches: impl Fn(&tracing::Level, &str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen: Vec<_> = EVENTS.lock().unwrap().clone();
        if seen
            .iter()
            .any(|(level, _, message)| matches(level, message))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no log event {what} within 10 s; got {seen:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_lost_locks_and_subscriptions_are_logged_without_the_password() {
    alone!();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture)).unwrap();
    let server = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let url = format!("redis://:s3cret-pw@127.0.0.1:{}/0", server.port);
    let mut admin = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let options = ClientOptions::new().watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect_with(&url, options).await.unwrap();
    let waiter = Client::connect_with(&url, ClientOptions::new())
        .await
        .unwrap();
    let address = format!("127.0.0.1:{}", server.port);

    // A waiter subscribes while the lock is held, and leaves once it has it.
    let lock = client.lock("log:orders").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let theirs = waiter.lock("log:orders").unwrap();
    let pending = tokio::spawn(async move {
        let wait = AcquireOptions::new().wait(Duration::from_secs(10));
        let won = theirs.acquire_as(Owner::new(2), &wait).await.unwrap();
        theirs.release_as(Owner::new(2)).await.unwrap();
        won
    });
    wait_for_event("subscribed", |level, m| {
        *level == tracing::Level::DEBUG && m == "subscribed to redisson_lock__channel:{log:orders}"
    });
    assert!(lock.release_as(Owner::new(1)).await.unwrap());
    assert!(pending.await.unwrap());
    wait_for_event("unsubscribed", |_, m| {
        m.starts_with("unsubscribed from redisson_lock__channel")
    });

    // The server drops every connection: each is reported lost once and back once.
    let quick = AcquireOptions::new().wait(Duration::from_secs(5));
    assert!(lock.acquire_as(Owner::new(1), &quick).await.unwrap());
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
        .unwrap();
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut admin)
        .unwrap();
    wait_for_event("command connection lost", |level, m| {
        *level == tracing::Level::WARN
            && m.starts_with(&format!("command connection to {address} lost"))
    });
    wait_for_event("subscription connection lost", |level, m| {
        *level == tracing::Level::WARN
            && m.starts_with(&format!("subscription connection to {address} lost"))
    });
    wait_for_event("command connection back", |level, m| {
        *level == tracing::Level::INFO && *m == format!("command connection to {address} is back")
    });

    // Someone deletes a held lock: the renewal finds it gone and says so.
    let _: () = redis::cmd("DEL")
        .arg("log:orders")
        .query(&mut admin)
        .unwrap();
    let holder = client.holder(Owner::new(1));
    wait_for_event("lock lost", |level, m| {
        *level == tracing::Level::WARN
            && m.starts_with(&format!(
                "lock 'log:orders' lost by {holder}: a renewal found it gone"
            ))
    });

    client.close().await;
    waiter.close().await;
    let events = EVENTS.lock().unwrap();
    assert!(
        events.iter().all(|(_, target, _)| target == "crosslock"),
        "{events:#?}"
    );
    assert!(
        events.iter().all(|(_, _, m)| !m.contains("s3cret-pw")),
        "a log line carries the password: {events:#?}"
    );
}
