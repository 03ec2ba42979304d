// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, GroupCodec, Owner, group_field};
use redis::Commands;
use support::RedisServer;

async fn client(server: &RedisServer) -> Client {
    Client::connect(&server.url()).await.unwrap()
}

fn once() -> AcquireOptions {
    AcquireOptions::new().wait(Duration::ZERO)
}

fn hash(server: &RedisServer, key: &str) -> HashMap<String, String> {
    server.raw().hgetall(key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_writes_redissons_fields_and_release_publishes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut sub = server.raw();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("redisson_lock__channel:{orders}").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();

    let lock = client.group_lock("orders", ["42", "héllo"]).unwrap();
    assert_eq!(lock.name(), "orders");
    let owner = Owner::new(7);
    let lease = AcquireOptions::new().lease(Duration::from_secs(20));
    assert!(lock.acquire_as(owner, &lease).await.unwrap());

    let holder = format!("{}:7", client.id());
    let fields = hash(&server, "orders");
    assert_eq!(fields.len(), 6, "{fields:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for value in ["42", "héllo"] {
        let field = group_field(value, GroupCodec::Kryo5);
        assert_eq!(fields.get(&field), Some(&holder), "{fields:?}");
        assert_eq!(fields[&format!("{field}:{holder}:lock_count")], "1");
        let expiry: i64 = fields[&format!("{field}:{holder}:expire_time")]
            .parse()
            .unwrap();
        assert!(
            expiry > now + 15_000 && expiry <= now + 20_000,
            "{expiry} vs {now}"
        );
    }
    let pttl: i64 = server.raw().pttl("orders").unwrap();
    assert!(pttl > 15_000 && pttl <= 20_000, "pttl {pttl}");

    assert!(lock.release_as(owner).await.unwrap());
    let exists: bool = server.raw().exists("orders").unwrap();
    assert!(!exists, "the last value's release empties the hash");
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{orders}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_exclude_and_disjoint_sets_do_not() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let (a, b) = (Owner::new(1), Owner::new(2));
    let ab = client.group_lock("g", ["a", "b"]).unwrap();
    assert!(ab.acquire_as(a, &once()).await.unwrap());

    let bc = client.group_lock("g", ["b", "c"]).unwrap();
    assert!(!bc.acquire_as(b, &once()).await.unwrap(), "b is shared");
    // All or none: the refused attempt took c neither.
    let c = client.group_lock("g", ["c"]).unwrap();
    assert!(!c.is_locked().await.unwrap());

    let cd = client.group_lock("g", ["c", "d"]).unwrap();
    assert!(
        cd.acquire_as(b, &once()).await.unwrap(),
        "disjoint sets share the group"
    );
    assert!(ab.is_held_by(a).await.unwrap());
    assert!(cd.is_held_by(b).await.unwrap());
    assert_eq!(
        ab.holders_now().await.unwrap(),
        vec![format!("{}:1", client.id())]
    );

    let err = ab.release_as(b).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert!(err.to_string().contains("'g'"), "{err}");
    assert!(
        ab.is_held_by(a).await.unwrap(),
        "a refused release changes nothing"
    );
    assert!(ab.release_as(a).await.unwrap());
    assert!(!bc.acquire_as(a, &once()).await.unwrap(), "c is still b's");
    assert!(cd.release_as(b).await.unwrap());
    assert!(bc.acquire_as(a, &once()).await.unwrap());
    assert!(bc.release_as(a).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_counts_holds_per_value_set() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let me = Owner::new(3);
    let lock = client.group_lock("re", ["x", "y"]).unwrap();
    assert!(lock.acquire_as(me, &once()).await.unwrap());
    assert!(lock.acquire_as(me, &once()).await.unwrap());
    assert_eq!(lock.hold_count_of(me).await.unwrap(), 2);
    // The same owner may hold another set of the group beside it.
    let other = client.group_lock("re", ["z"]).unwrap();
    assert!(other.acquire_as(me, &once()).await.unwrap());

    assert!(!lock.release_as(me).await.unwrap(), "one hold remains");
    assert_eq!(lock.hold_count_of(me).await.unwrap(), 1);
    assert!(lock.release_as(me).await.unwrap());
    assert_eq!(lock.hold_count_of(me).await.unwrap(), 0);
    assert!(other.is_held_by(me).await.unwrap());
    assert!(other.release_as(me).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiter_of_an_overlapping_set() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let holder = client.group_lock("wake", ["1", "2"]).unwrap();
    let guard = holder.acquire().await.unwrap();

    let waiter = client.group_lock("wake", ["2", "3"]).unwrap();
    let waiting = tokio::spawn(async move {
        // A watchdog hold: only the release (a message) can end this wait before 30 s.
        let options = AcquireOptions::new()
            .owner(Owner::new(9))
            .wait(Duration::from_secs(20));
        waiter.acquire_with(options).await.map(|g| g.owner())
    });
    support::until("the waiter to subscribe", async || {
        server.subscribers("redisson_lock__channel:{wake}") >= 1
    })
    .await;
    guard.release().await.unwrap();
    let owner = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter was woken")
        .unwrap()
        .unwrap();
    assert_eq!(owner, Owner::new(9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_every_field_and_reports_a_lost_one() {
    let server = RedisServer::start();
    let options = ClientOptions::new().watchdog_timeout(Duration::from_millis(600));
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let lock = client.group_lock("wd", ["p", "q"]).unwrap();
    let guard = lock.acquire().await.unwrap();
    let holder = client.holder(guard.owner());
    let expiry_field = format!(
        "{}:{holder}:expire_time",
        group_field("q", GroupCodec::Kryo5)
    );
    let first: i64 = hash(&server, "wd")[&expiry_field].parse().unwrap();
    // Renewed twice: past the first lease, still ours.
    support::until("two renewals", async || {
        let now: i64 = hash(&server, "wd")[&expiry_field].parse().unwrap();
        now > first + 600
    })
    .await;
    assert!(lock.is_held_by(guard.owner()).await.unwrap());
    assert!(!guard.lost().is_cancelled());

    // Someone force-unlocks one of the values: the hold is lost.
    let q = client.group_lock("wd", ["q"]).unwrap();
    assert!(q.force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), guard.lost().cancelled())
        .await
        .expect("loss reported");
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        ErrorKind::LockLost
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_sets_every_fields_expiry() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.group_lock("ext", ["m"]).unwrap();
    let me = Owner::new(4);
    let short = AcquireOptions::new().lease(Duration::from_secs(5));
    assert!(lock.acquire_as(me, &short).await.unwrap());
    lock.extend_as(me, Duration::from_secs(60)).await.unwrap();
    let left = lock.remaining_lease().await.unwrap().unwrap();
    assert!(left > Duration::from_secs(55), "{left:?}");
    let pttl: i64 = server.raw().pttl("ext").unwrap();
    assert!(pttl > 55_000, "the hash lives as long: {pttl}");
    assert!(lock.release_as(me).await.unwrap());
    let err = lock
        .extend_as(me, Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_values_and_another_kinds_key_are_refused_clearly() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let none: [&str; 0] = [];
    let err = client.group_lock("g", none).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("at least one value"), "{err}");
    let err = client.group_lock("g", ["a", "b", "a"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("\"a\" is given twice"), "{err}");
    let err = client.group_lock("", ["a"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);

    // An RLock at the name: a group lock leaves it alone.
    let rlock = client.lock("taken").unwrap();
    let guard = rlock.acquire().await.unwrap();
    let before = hash(&server, "taken");
    let err = client
        .group_lock("taken", ["a"])
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType);
    assert!(err.to_string().contains("another kind"), "{err}");
    assert_eq!(hash(&server, "taken"), before);
    guard.release().await.unwrap();

    let _: () = server.raw().set("plain", "x").unwrap();
    let err = client
        .group_lock("plain", ["a"])
        .unwrap()
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType);
    let value: String = server.raw().get("plain").unwrap();
    assert_eq!(value, "x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_string_codec_names_fields_by_the_utf8_bytes() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client
        .group_lock_with("sc", ["日本語"], GroupCodec::String)
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(hash(&server, "sc").contains_key("4PLJx8KOCYUcHV8bTDfq4g"));
    // The Kryo5 field of the same value is another field: no exclusion across codecs.
    let kryo = client.group_lock("sc", ["日本語"]).unwrap();
    assert!(!kryo.is_locked().await.unwrap());
    guard.release().await.unwrap();
}
