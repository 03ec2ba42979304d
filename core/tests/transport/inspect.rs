//! The inspector: `Client::inspect` reports what lives at a name, as Redis has it, for every kind
//! of object; `Client::scan` lists object names with SCAN.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use crosslock::{AcquireOptions, Client, ObjectKind, Owner};
use support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_reports_every_kind_of_object_as_redis_has_it() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let id = client.id();

    let seen = client.inspect("nothing").await.unwrap();
    assert_eq!(seen.kind, ObjectKind::Absent);
    assert!(seen.holders.is_empty() && seen.ttl.is_none());
    assert!(
        client.inspect("").await.is_err(),
        "an empty name is refused"
    );

    // A reentrant lock held twice under the watchdog.
    let lock = client.lock("orders:42").unwrap();
    let me = Owner::new(7);
    for _ in 0..2 {
        assert!(lock.acquire_as(me, &AcquireOptions::new()).await.unwrap());
    }
    let seen = client.inspect("orders:42").await.unwrap();
    assert_eq!(seen.kind, ObjectKind::Lock);
    assert_eq!(seen.holders.len(), 1);
    let h = &seen.holders[0];
    assert_eq!(
        (h.holder.as_str(), h.client_id.as_str(), h.holds, h.write),
        (format!("{id}:7").as_str(), id.as_str(), 2, false)
    );
    let ttl = seen.ttl.unwrap();
    assert!(
        ttl > Duration::from_secs(20) && ttl <= Duration::from_secs(30),
        "{ttl:?}"
    );
    assert_eq!(
        seen.renewed_within_period(Duration::from_secs(30)),
        Some(true)
    );
    assert_eq!(
        seen.renewed_within_period(Duration::from_secs(300)),
        Some(false)
    );

    // A fenced lock: held, then free with its counter left.
    let fenced = client.fenced_lock("ledger").unwrap();
    let guard = fenced.acquire().await.unwrap();
    let seen = client.inspect("ledger").await.unwrap();
    assert_eq!(
        (seen.kind.clone(), seen.token, seen.holders.len()),
        (ObjectKind::FencedLock, Some(1), 1)
    );
    guard.release().await.unwrap();
    let seen = client.inspect("ledger").await.unwrap();
    assert_eq!(
        (seen.kind, seen.token, seen.holders.len()),
        (ObjectKind::FencedLock, Some(1), 0)
    );

    // A fair lock with two waiters queued behind its holder.
    let fair = client.fair_lock("printer").unwrap();
    assert!(
        fair.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let mut waiters = Vec::new();
    for (i, n) in [2u64, 3].into_iter().enumerate() {
        let theirs = other.fair_lock("printer").unwrap();
        waiters.push(tokio::spawn(async move {
            theirs
                .acquire_as(
                    Owner::new(n),
                    &AcquireOptions::new().wait(Duration::from_secs(30)),
                )
                .await
        }));
        while fair.queue().await.unwrap().len() < i + 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let seen = client.inspect("printer").await.unwrap();
    assert_eq!(seen.kind, ObjectKind::FairLock);
    let oid = other.id();
    assert_eq!(
        seen.queue
            .iter()
            .map(|w| w.holder.clone())
            .collect::<Vec<_>>(),
        [format!("{oid}:2"), format!("{oid}:3")]
    );
    assert!(seen.queue.iter().all(|w| w.deadline_ms.is_some()));
    for w in waiters {
        w.abort();
    }

    // A read-write lock with two readers, each read hold with its own lease.
    let rw = client.read_write_lock("catalog").unwrap();
    for n in [4u64, 5] {
        assert!(
            rw.read()
                .acquire_as(Owner::new(n), &AcquireOptions::new())
                .await
                .unwrap()
        );
    }
    assert!(
        rw.read()
            .acquire_as(Owner::new(4), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let seen = client.inspect("catalog").await.unwrap();
    assert_eq!(
        (seen.kind.clone(), seen.mode.as_deref()),
        (ObjectKind::ReadWriteLock, Some("read"))
    );
    let reader = seen
        .holders
        .iter()
        .find(|h| h.holder == format!("{id}:4"))
        .unwrap();
    assert_eq!((reader.holds, reader.read_leases.len()), (2, 2));
    assert!(
        reader
            .read_leases
            .iter()
            .all(|l| *l > Duration::from_secs(20))
    );

    // A writer.
    let rw2 = client.read_write_lock("catalog:w").unwrap();
    assert!(
        rw2.write()
            .acquire_as(Owner::new(6), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let seen = client.inspect("catalog:w").await.unwrap();
    assert_eq!(seen.mode.as_deref(), Some("write"));
    assert!(seen.holders[0].write && seen.holders[0].holder == format!("{id}:6:write"));

    // A semaphore's permits, and a permit-expirable semaphore's permits out.
    let sem = client.semaphore("renderers").unwrap();
    assert!(sem.try_set_permits(3).await.unwrap());
    let seen = client.inspect("renderers").await.unwrap();
    assert_eq!((seen.kind, seen.count), (ObjectKind::Counter, Some(3)));
    let pes = client.permit_expirable_semaphore("licenses").unwrap();
    assert!(pes.try_set_permits(2).await.unwrap());
    let permit = pes
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap();
    let seen = client.inspect("licenses").await.unwrap();
    assert_eq!(
        (seen.kind.clone(), seen.count),
        (ObjectKind::PermitExpirableSemaphore, Some(1))
    );
    assert_eq!(seen.permits.len(), 1);
    assert_eq!(seen.permits[0].id, permit.id());
    assert!(seen.permits[0].expires_ms.is_some());

    // Anything else is named by its Redis type.
    let mut raw = server.raw();
    let _: () = redis::cmd("RPUSH")
        .arg("jobs")
        .arg("x")
        .query(&mut raw)
        .unwrap();
    assert_eq!(
        client.inspect("jobs").await.unwrap().kind,
        ObjectKind::Other("list".into())
    );

    // SCAN lists object names, not their sibling keys; a free fenced lock is listed by its counter.
    let names = client.scan("*", 1000).await.unwrap();
    for expected in [
        "orders:42",
        "ledger",
        "printer",
        "catalog",
        "catalog:w",
        "renderers",
        "licenses",
        "jobs",
    ] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} missing from {names:?}"
        );
    }
    assert!(
        names
            .iter()
            .all(|n| !n.starts_with("redisson_") && !n.contains("rwlock_timeout")),
        "{names:?}"
    );
    assert_eq!(client.scan("order*", 1000).await.unwrap(), ["orders:42"]);
    assert_eq!(client.scan("*", 2).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_summary_and_force_unlock_any_follow_the_kind() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let id = client.id();
    let rw = client.read_write_lock("doc").unwrap();
    assert!(
        rw.write()
            .acquire_as(Owner::new(3), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let seen = client.inspect("doc").await.unwrap();
    let text = seen.describe(Duration::from_secs(30));
    assert!(
        text.starts_with("doc: read write lock, write mode\n  lease left: "),
        "{text}"
    );
    assert!(
        text.contains(&format!("  writer {id}:3:write × 1")),
        "{text}"
    );
    assert!(!text.contains("not renewed"), "{text}");
    assert!(
        seen.describe(Duration::from_secs(300))
            .contains("not renewed within the last 100 s")
    );
    assert!(
        seen.summary().starts_with(&format!(
            "doc\tread_write_lock\theld by {id}:3:write×1 (crosslock-rs-"
        )),
        "{}",
        seen.summary()
    );
    assert_eq!(
        client
            .inspect("none")
            .await
            .unwrap()
            .describe(Duration::from_secs(30)),
        "none: nothing there (free)"
    );

    assert!(client.force_unlock_any("doc").await.unwrap());
    assert!(
        !client.force_unlock_any("doc").await.unwrap(),
        "nothing left to unlock"
    );
    let sem = client.semaphore("slots").unwrap();
    assert!(sem.try_set_permits(2).await.unwrap());
    let err = client.force_unlock_any("slots").await.unwrap_err();
    assert_eq!(err.kind(), crosslock::ErrorKind::WrongType, "{err}");
    assert_eq!(sem.available_permits().await.unwrap(), 2);
}

/// The connection names in `CLIENT LIST` of `server`.
fn names_on_server(server: &RedisServer) -> Vec<String> {
    let text = match server.command(&["CLIENT", "LIST"]) {
        redis::Value::VerbatimString { text, .. } | redis::Value::SimpleString(text) => text,
        v => redis::from_redis_value(v).unwrap(),
    };
    names_in(&text)
}

fn names_in(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("name=")))
        .map(str::to_owned)
        .collect()
}

/// Checks the process the inspector names behind `client`'s hold of `name`, as seen by `other`.
async fn assert_process_named(client: &Client, other: &Client, name: &str, base: &str) {
    let guard = client.lock(name).unwrap().acquire().await.unwrap();
    let seen = other.inspect(name).await.unwrap();
    let h = &seen.holders[0];
    let p = h.process.as_ref().expect("the holder's process is found");
    let id8: String = client.id().replace('-', "")[..8].to_owned();
    assert_eq!(p.name, format!("{base}-rs-{}-{id8}", std::process::id()));
    assert_eq!((p.language.as_str(), p.pid), ("rs", std::process::id()));
    assert_eq!(p.host, "127.0.0.1");
    assert!(p.address.starts_with("127.0.0.1:"), "{}", p.address);
    let text = seen.describe(Duration::from_secs(30));
    assert!(
        text.contains(&format!("Rust pid {}", std::process::id())),
        "{text}"
    );
    assert!(seen.summary().contains(&p.name), "{}", seen.summary());
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_is_named_and_the_inspector_names_the_holders_process() {
    let server = RedisServer::start();
    let options = crosslock::ClientOptions::new().client_name("orders-api");
    let client = Client::connect_with(&server.url(), options).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let pid = std::process::id();
    let mine = format!("orders-api-rs-{pid}-{}", &client.id().replace('-', "")[..8]);
    let theirs = format!("crosslock-rs-{pid}-{}", &other.id().replace('-', "")[..8]);
    assert_process_named(&client, &other, "orders:42", "orders-api").await;
    assert_process_named(&other, &client, "orders:43", "crosslock").await;
    // Every connection but the test's own raw one carries one of the two names: command,
    // subscription and the caller's lanes alike.
    let named = |names: Vec<String>| {
        names
            .iter()
            .filter(|n| !n.is_empty())
            .all(|n| *n == mine || *n == theirs)
            && names.iter().filter(|n| n.is_empty()).count() <= 1
            && names.contains(&mine)
            && names.contains(&theirs)
    };
    support::until("every connection named", async || {
        named(names_on_server(&server))
    })
    .await;

    // A connection the server closed comes back named.
    server.command(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    server.command(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_process_named(&client, &other, "orders:44", "orders-api").await;
    support::until("every reconnected connection named", async || {
        named(names_on_server(&server))
    })
    .await;

    // A Redisson holder (no crosslock connection behind it) is shown as it is.
    server.command(&[
        "HSET",
        "orders:45",
        "6f1e8a52-0000-4000-8000-000000000000:1",
        "1",
    ]);
    let seen = client.inspect("orders:45").await.unwrap();
    assert_eq!(seen.holders[0].process, None);
    assert!(!seen.describe(Duration::from_secs(30)).contains(" — "));
    client.close().await;
    other.close().await;
}

/// Where the server has `CLIENT SETINFO` (Redis ≥ 7.2, Valkey) every connection of a client says
/// `lib-name=crosslock lib-ver=<version>` in `CLIENT LIST`: the command connection, the
/// subscription and the caller's lanes. An older server refuses SETINFO, and the same connections
/// work and are named all the same. (Run with `CROSSLOCK_REDIS_BIN=<dir of a redis-server>` for
/// the other path.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_says_lib_name_and_version_where_the_server_takes_setinfo() {
    let server = RedisServer::start();
    let has_setinfo = support::server_version(server.port) >= (7, 2);
    let client = Client::connect(&server.url()).await.unwrap();
    let id8: String = client.id().replace('-', "")[..8].to_owned();
    let mine = format!("crosslock-rs-{}-{id8}", std::process::id());
    // A hold and a waiter subscribed for it: every kind of connection is open.
    let guard = client.lock("lib:x").unwrap().acquire().await.unwrap();
    let lock = client.lock("lib:x").unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire_as(
                Owner::new(7),
                &AcquireOptions::new().wait(Duration::from_secs(30)),
            )
            .await
        })
    };
    support::until("the waiter subscribed", async || {
        server.subscribers("redisson_lock__channel:{lib:x}") == 1
    })
    .await;
    let lines: Vec<String> = support::client_list(server.port)
        .into_iter()
        .filter(|l| support::client_field(l, "name") == Some(&mine))
        .collect();
    assert!(
        lines.len() >= 2,
        "a command and a subscription connection named {mine}: {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| support::client_field(l, "sub") == Some("1")),
        "{lines:#?}"
    );
    for line in &lines {
        let (lib, ver) = (
            support::client_field(line, "lib-name"),
            support::client_field(line, "lib-ver"),
        );
        if has_setinfo {
            assert_eq!(lib, Some("crosslock"), "{line}");
            assert_eq!(ver, Some(env!("CARGO_PKG_VERSION")), "{line}");
        } else {
            assert_eq!(
                (lib, ver),
                (None, None),
                "no SETINFO before Redis 7.2: {line}"
            );
        }
    }
    guard.release().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
    assert!(lock.release_as(Owner::new(7)).await.unwrap());
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_name_is_checked_before_connecting() {
    for bad in ["", "two words", "new\nline", &"x".repeat(65)] {
        let options = crosslock::ClientOptions::new().client_name(bad);
        let e = Client::connect_with("redis://127.0.0.1:1", options)
            .await
            .unwrap_err();
        assert_eq!(
            e.kind(),
            crosslock::ErrorKind::InvalidArgument,
            "{bad:?}: {e}"
        );
        assert!(e.to_string().contains("client_name"), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_names_the_holders_process_behind_sentinel_and_on_a_cluster() {
    let group = support::SentinelGroup::start();
    let client = Client::connect(&group.url()).await.unwrap();
    let other = Client::connect(&group.url()).await.unwrap();
    assert_process_named(&client, &other, "orders:42", "crosslock").await;
    client.close().await;
    other.close().await;
    drop(group);

    let cluster = support::Cluster::start();
    let client = Client::connect(&cluster.url()).await.unwrap();
    let other = Client::connect(&cluster.url()).await.unwrap();
    // Names on different masters: the one that holds each key is asked.
    for name in ["orders:42", "orders:43", "a", "b", "c"] {
        assert_process_named(&client, &other, name, "crosslock").await;
    }
    client.close().await;
    other.close().await;
}

/// A number at `name` with a waiter of `waiting` on it is told apart as that kind.
async fn assert_waited_counter_told_apart(url: &str) {
    let client = Client::connect(url).await.unwrap();
    let semaphore = client.semaphore("slots").unwrap();
    semaphore.try_set_permits(0).await.unwrap();
    let latch = client.count_down_latch("batch").unwrap();
    latch.try_set_count(2).await.unwrap();
    assert_eq!(
        client.inspect("slots").await.unwrap().kind,
        ObjectKind::Counter
    );
    let waiter = {
        let s = client.semaphore("slots").unwrap();
        tokio::spawn(async move { s.acquire(1).await })
    };
    let latch_waiter = {
        let l = client.count_down_latch("batch").unwrap();
        tokio::spawn(async move { l.wait().await })
    };
    support::until("the semaphore told apart", async || {
        client.inspect("slots").await.unwrap().kind == ObjectKind::Semaphore
    })
    .await;
    support::until("the latch told apart", async || {
        client.inspect("batch").await.unwrap().kind == ObjectKind::CountDownLatch
    })
    .await;
    let text = client
        .inspect("slots")
        .await
        .unwrap()
        .describe(Duration::from_secs(30));
    assert!(
        text.contains("semaphore") && text.contains("permits available: 0"),
        "{text}"
    );
    semaphore.release(1).await.unwrap();
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    waiter.await.unwrap().unwrap();
    latch_waiter.await.unwrap().unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_and_a_latch_with_waiters_are_told_apart() {
    let server = RedisServer::start();
    assert_waited_counter_told_apart(&server.url()).await;
    let cluster = support::Cluster::start();
    assert_waited_counter_told_apart(&cluster.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_text_marks_a_holder_of_this_very_client_without_asking_for_processes() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let other = Client::connect(&server.url()).await.unwrap();
    let lock = client.lock("t:busy").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    let wait = AcquireOptions::new().wait(Duration::from_millis(50));
    let mine = lock.acquire_as(Owner::new(2), &wait).await.unwrap();
    assert!(!mine);
    let e = lock
        .timeout_error(Owner::new(2), Duration::from_millis(50))
        .await;
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "{}:1 (this client, pid {})",
            client.id(),
            std::process::id()
        )),
        "{text}"
    );
    // Another client's holder is shown as stored (its process is inspect's to find).
    let theirs = other.lock("t:busy").unwrap();
    let e = theirs
        .timeout_error(Owner::new(3), Duration::from_millis(50))
        .await;
    assert!(
        e.to_string()
            .contains(&format!("held by {}:1;", client.id())),
        "{e}"
    );
    client.close().await;
    other.close().await;
}
