//! Input: no credential of any URL form in an error, its `Debug`, a log line or the client's
//! `Debug`; every limit of `crosslock::limits` refused before anything is sent; a database index
//! no Redis has is an invalid argument; a release or force-unlock on another kind's key is
//! `WrongType` and changes nothing.
//!
//! Each test runs in a process of its own (`alone!`): it installs the process's global `tracing`
//! subscriber (one per process, set once) to capture every log line, so no other test's logs mix
//! in, and no other test's subscriber (`logging.rs`) can clash with it.

use crate::support;

use std::sync::{Mutex, Once};
use std::time::Duration;

use crosslock::{AcquireOptions, Client, ClientOptions, ErrorKind, Owner, limits};
use support::RedisServer;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// Every log event's text, from every test of this file.
static EVENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        EVENTS
            .lock()
            .unwrap()
            .push(crosslock::ffi::event_text(event));
    }
}

fn capture_logs() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture))
            .unwrap();
    });
}

/// Every secret below contains this.
const SECRET: &str = "s3cr3t";

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Every URL form with its credentials, each failing to connect in its own way.
fn secret_urls(live: u16, closed: u16) -> Vec<String> {
    vec![
        // user info: refused by the server, unreachable, no such database, a bad parameter
        format!("redis://default:{SECRET}-a@127.0.0.1:{live}/0"),
        format!("redis://app:{SECRET}-b@127.0.0.1:{closed}/0"),
        format!("redis://{SECRET}-c@127.0.0.1:{closed}/0"),
        format!("redis://:{SECRET}-d@127.0.0.1:{live}/99999999999"),
        format!("redis://:{SECRET}-e@127.0.0.1:{live}/0?protocol=9"),
        format!("redis://:p@{SECRET}-f@127.0.0.1:{closed}/0"),
        format!("redis://:pa/{SECRET}-g@127.0.0.1:{closed}/0"),
        format!("redis://:pa?{SECRET}-h@127.0.0.1:{closed}/0"),
        format!("rediss://:{SECRET}-i@127.0.0.1:{closed}/0#{SECRET}-frag"),
        format!("{SECRET}-j@127.0.0.1:{closed}"),
        // a Unix socket's query credentials
        format!("redis+unix:///nonexistent/r.sock?user={SECRET}-user&pass={SECRET}-k"),
        format!("redis+unix:///nonexistent/r.sock?pass={SECRET}-l&db=99999999999"),
        // Sentinel: the data nodes' user info and the sentinels' own
        format!(
            "redis+sentinel://app:{SECRET}-m@127.0.0.1:{closed}/m?sentinel_username={SECRET}-su\
             &sentinel_password={SECRET}-n"
        ),
        format!("redis+sentinel://127.0.0.1:{closed}/m?sentinel_password={SECRET}-o&unknown=1"),
        format!("redis+sentinel://127.0.0.1:{closed}/m?sentinel_pasword={SECRET}-p"),
        format!("redis+sentinel://127.0.0.1:{closed}/m?{SECRET}-q"),
        format!("redis+sentinel://127.0.0.1:{closed}/m?sentinel_password=a@{SECRET}-r"),
        format!("redis+sentinel://u:pa/{SECRET}-s@127.0.0.1:{closed}/m"),
        format!("redis+sentinel://:{SECRET}-t@127.0.0.1:{closed}/m/99999999999"),
        // Cluster
        format!("redis+cluster://u:{SECRET}-u@127.0.0.1:{closed}"),
        format!("redis+cluster://u:{SECRET}-v@127.0.0.1:{closed}?password={SECRET}-w"),
        format!("redis+cluster://127.0.0.1:{closed}/5?x={SECRET}-x"),
        format!("redis+cluster://127.0.0.1:{closed}?{SECRET}-y"),
    ]
}

/// An error's text, its `Debug` and every source's text.
fn all_text(err: &crosslock::Error) -> String {
    let mut text = format!("{err}\n{err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(&format!("\n{s}\n{s:?}"));
        source = s.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_of_any_url_form_reaches_an_error_a_log_line_or_debug() {
    alone!();
    capture_logs();
    let server = RedisServer::start_with(&["--requirepass", "right-password"]);
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(500));
    let mut leaks = Vec::new();
    for url in secret_urls(server.port, closed_port()) {
        let err = Client::connect_with(&url, options.clone())
            .await
            .err()
            .unwrap_or_else(|| panic!("{url} connected"));
        let text = all_text(&err);
        assert!(text.len() > 20, "{url}: {text}");
        if text.contains(SECRET) {
            leaks.push(format!("{url}:\n  {text}"));
        }
    }
    // With a TLS CA for a URL that is not rediss://
    let url = format!("redis://:{SECRET}-z@127.0.0.1:{}/0", server.port);
    let err = Client::connect_with(&url, options.clone().tls_ca_cert(b"pem".to_vec()))
        .await
        .unwrap_err();
    if all_text(&err).contains(SECRET) {
        leaks.push(format!("{url} (TLS CA): {}", all_text(&err)));
    }
    // A client that did connect, through a password: its Debug, and the logs of a reconnect.
    let url = format!("redis://default:right-password@127.0.0.1:{}/0", server.port);
    let client = Client::connect_with(&url, options).await.unwrap();
    let shown = format!("{client:?}");
    assert!(!shown.contains("right-password"), "{shown}");
    let guard = client.lock("secrets").unwrap().acquire().await.unwrap();
    let _: redis::Value = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query(
            &mut redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap(),
        )
        .unwrap();
    guard.release().await.unwrap();
    client.close().await;
    let events = EVENTS.lock().unwrap().clone();
    for event in &events {
        if event.contains(SECRET) || event.contains("right-password") {
            leaks.push(format!("log: {event}"));
        }
    }
    assert!(leaks.is_empty(), "credentials shown:\n{}", leaks.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_index_no_redis_has_is_an_invalid_argument_naming_it_and_the_range() {
    alone!();
    let server = RedisServer::start();
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(500));
    for db in ["99999999999", "2147483648", "-1"] {
        for url in [
            format!("redis://127.0.0.1:{}/{db}", server.port),
            format!("redis+unix:///nonexistent/r.sock?db={db}"),
            format!("redis+sentinel://127.0.0.1:{}/m/{db}", server.port),
        ] {
            let err = Client::connect_with(&url, options.clone())
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{url}: {err}");
            assert!(err.to_string().contains(db), "{url}: {err}");
            assert!(err.to_string().contains(limits::DB.shown), "{url}: {err}");
        }
    }
    // The largest index Redis could have is no argument error of ours: the server's answer,
    // also when the connect timeout is shorter than the retries of a first connection (a
    // refusal no retry changes is not "no answer").
    for timeout in [Duration::from_secs(5), Duration::from_millis(200)] {
        let options = ClientOptions::new().connect_timeout(timeout);
        for db in ["20", "2147483647"] {
            let url = format!("redis://127.0.0.1:{}/{db}", server.port);
            let err = Client::connect_with(&url, options.clone())
                .await
                .unwrap_err();
            assert_eq!(
                err.kind(),
                ErrorKind::InvalidArgument,
                "{url}, {timeout:?}: {err}"
            );
            assert!(err.to_string().contains("databases"), "{err}");
        }
    }
    let guarded = RedisServer::start_with(&["--requirepass", "right"]);
    let url = format!("redis://:wrong@127.0.0.1:{}/0", guarded.port);
    let options = ClientOptions::new().connect_timeout(Duration::from_millis(200));
    let err = Client::connect_with(&url, options).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
}

/// How many scripts the server has run, and the keys it has.
fn footprint(server: &RedisServer) -> (u64, Vec<String>) {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.raw())
        .unwrap();
    keys.sort();
    (server.calls("eval") + server.calls("evalsha"), keys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_is_refused_before_anything_is_sent() {
    alone!();
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let sem = client.semaphore("limits:sem").unwrap();
    let pes = client.permit_expirable_semaphore("limits:pes").unwrap();
    let latch = client.count_down_latch("limits:latch").unwrap();
    let lock = client.lock("limits:lock").unwrap();
    let below = |l: limits::Limit| l.min - 1;
    let above = |l: limits::Limit| l.max + 1;
    let before = footprint(&server);
    for limit in limits::ALL {
        let mut outcomes: Vec<(String, crosslock::Result<()>)> = Vec::new();
        match limit.name {
            "permits" => {
                outcomes.push(("release(0)".into(), sem.release(0).await));
            }
            // A u32 is the whole range: the type is the check in Rust.
            "permits_set" => continue,
            "permit_delta" => {
                for n in [below(*limit), above(*limit)] {
                    outcomes.push((
                        format!("sem.add_permits({n})"),
                        sem.add_permits(n).await.map(|_| ()),
                    ));
                    outcomes.push((
                        format!("pes.add_permits({n})"),
                        pes.add_permits(n).await.map(|_| ()),
                    ));
                }
            }
            "latch_count" => {
                for n in [below(*limit), above(*limit)] {
                    outcomes.push((
                        format!("try_set_count({n})"),
                        latch.try_set_count(n as u64).await.map(|_| ()),
                    ));
                }
            }
            "db" => {
                for n in [below(*limit), above(*limit)] {
                    let url = format!("redis://127.0.0.1:{}/{n}", server.port);
                    outcomes.push((
                        format!("connect {url}"),
                        Client::connect(&url).await.map(|_| ()),
                    ));
                }
            }
            "watchdog_batch" => {
                let mut options = ClientOptions::new();
                options.watchdog_batch_size = 0;
                outcomes.push((
                    "watchdog_batch_size 0".into(),
                    Client::connect_with(&server.url(), options)
                        .await
                        .map(|_| ()),
                ));
                let mut options = ClientOptions::new();
                options.watchdog_batch_size = above(*limit) as usize;
                outcomes.push((
                    "watchdog_batch_size 2^32".into(),
                    Client::connect_with(&server.url(), options)
                        .await
                        .map(|_| ()),
                ));
            }
            "replicas" => {
                let options = ClientOptions::new().wait_for_replicas(0, Duration::from_millis(10));
                outcomes.push((
                    "wait_for_replicas(0)".into(),
                    Client::connect_with(&server.url(), options)
                        .await
                        .map(|_| ()),
                ));
            }
            "scan_limit" => {
                for n in [0, above(*limit) as usize] {
                    outcomes.push((
                        format!("scan(limit {n})"),
                        client.scan("*", n).await.map(|_| ()),
                    ));
                }
            }
            "lease_ms" => {
                for lease in [Duration::ZERO, Duration::from_millis(above(*limit) as u64)] {
                    let options = AcquireOptions::new().lease(lease);
                    outcomes.push((
                        format!("lease {lease:?}"),
                        lock.acquire_with(options).await.map(|_| ()),
                    ));
                }
            }
            "duration_ms" => {
                let wait = Duration::from_millis(above(*limit) as u64);
                outcomes.push((
                    format!("wait {wait:?}"),
                    lock.acquire_with(AcquireOptions::new().wait(wait))
                        .await
                        .map(|_| ()),
                ));
            }
            other => panic!("no case for the limit '{other}': add one"),
        }
        for (what, outcome) in outcomes {
            let err = outcome
                .err()
                .unwrap_or_else(|| panic!("{what} was accepted"));
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{what}: {err}");
        }
        assert_eq!(
            footprint(&server),
            before,
            "{}: something was sent",
            limit.name
        );
    }
    // The bounds themselves are accepted.
    assert_eq!(
        sem.add_permits(limits::PERMIT_DELTA.max).await.unwrap(),
        limits::PERMIT_DELTA.max
    );
    client.close().await;
}

/// What a key holds, to compare before and after: every key's DUMP.
fn dump(server: &RedisServer) -> Vec<(String, Vec<u8>)> {
    let mut raw = server.raw();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut raw).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let d: Vec<u8> = redis::cmd("DUMP").arg(&k).query(&mut raw).unwrap();
            (k, d)
        })
        .collect()
}

/// The layouts a key may hold: lock-family hashes, a read-write lock's hash, a counter string.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    LockHash,
    ReadWriteHash,
    Counter,
}

/// Puts an object of `layout` at `name`, held or set by someone else.
async fn occupy(client: &Client, layout: Layout, name: &str) {
    let other = AcquireOptions::new().owner(Owner::new(777));
    match layout {
        Layout::LockHash => {
            let lock = client.lock(name).unwrap();
            assert!(lock.acquire_as(Owner::new(777), &other).await.unwrap());
        }
        Layout::ReadWriteHash => {
            let rw = client.read_write_lock(name).unwrap();
            assert!(rw.read().acquire_as(Owner::new(777), &other).await.unwrap());
        }
        Layout::Counter => {
            assert!(
                client
                    .semaphore(name)
                    .unwrap()
                    .try_set_permits(3)
                    .await
                    .unwrap()
            );
        }
    }
}

type Release = for<'a> fn(
    &'a Client,
    &'a str,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = crosslock::Result<bool>> + Send + 'a>,
>;

/// Every release and force-unlock path, with the layout it works on.
fn releases() -> Vec<(&'static str, Layout, Release)> {
    vec![
        ("lock.release", Layout::LockHash, |c, n| {
            Box::pin(async move { c.lock(n)?.release_as(Owner::new(1)).await })
        }),
        ("lock.force_unlock", Layout::LockHash, |c, n| {
            Box::pin(async move { c.lock(n)?.force_unlock().await })
        }),
        ("fair_lock.release", Layout::LockHash, |c, n| {
            Box::pin(async move { c.fair_lock(n)?.release_as(Owner::new(1)).await })
        }),
        ("fair_lock.force_unlock", Layout::LockHash, |c, n| {
            Box::pin(async move { c.fair_lock(n)?.force_unlock().await })
        }),
        ("spin_lock.release", Layout::LockHash, |c, n| {
            Box::pin(async move { c.spin_lock(n)?.release_as(Owner::new(1)).await })
        }),
        ("fenced_lock.release", Layout::LockHash, |c, n| {
            Box::pin(async move { c.fenced_lock(n)?.release_as(Owner::new(1)).await })
        }),
        ("non_reentrant_lock.release", Layout::LockHash, |c, n| {
            Box::pin(async move { c.non_reentrant_lock(n)?.release_as(Owner::new(1)).await })
        }),
        ("read_lock.release", Layout::ReadWriteHash, |c, n| {
            Box::pin(async move { c.read_write_lock(n)?.read().release_as(Owner::new(1)).await })
        }),
        ("read_lock.force_unlock", Layout::ReadWriteHash, |c, n| {
            Box::pin(async move { c.read_write_lock(n)?.read().force_unlock().await })
        }),
        ("write_lock.release", Layout::ReadWriteHash, |c, n| {
            Box::pin(async move {
                c.read_write_lock(n)?
                    .write()
                    .release_as(Owner::new(1))
                    .await
            })
        }),
        ("write_lock.force_unlock", Layout::ReadWriteHash, |c, n| {
            Box::pin(async move { c.read_write_lock(n)?.write().force_unlock().await })
        }),
        ("semaphore.release", Layout::Counter, |c, n| {
            Box::pin(async move { c.semaphore(n)?.release(1).await.map(|_| true) })
        }),
        ("permits.try_release", Layout::Counter, |c, n| {
            Box::pin(async move {
                c.permit_expirable_semaphore(n)?
                    .try_release("0123456789abcdef0123456789abcdef")
                    .await
            })
        }),
        ("permits.update_lease", Layout::Counter, |c, n| {
            Box::pin(async move {
                c.permit_expirable_semaphore(n)?
                    .update_lease("0123456789abcdef0123456789abcdef", Duration::from_secs(5))
                    .await
            })
        }),
        ("latch.count_down", Layout::Counter, |c, n| {
            Box::pin(async move { c.count_down_latch(n)?.count_down().await.map(|_| true) })
        }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_release_and_force_unlock_on_another_kinds_key_is_wrong_type_and_changes_nothing() {
    alone!();
    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let mut wrong = Vec::new();
    for layout in [Layout::LockHash, Layout::ReadWriteHash, Layout::Counter] {
        for (what, works_on, release) in releases() {
            if works_on == layout {
                continue;
            }
            let name = format!("mix:{what}:{layout:?}");
            occupy(&client, layout, &name).await;
            let before = dump(&server);
            match release(&client, &name).await {
                // The text says what is wrong, not where in crosslock's Lua.
                Err(e)
                    if e.kind() == ErrorKind::WrongType
                        && !e.to_string().contains("script:")
                        && !e.to_string().contains("user_script") => {}
                other => wrong.push(format!("{what} on a {layout:?}: {other:?}")),
            }
            assert_eq!(
                dump(&server),
                before,
                "{what} on a {layout:?} changed Redis"
            );
        }
    }
    assert!(wrong.is_empty(), "not WrongType:\n{}", wrong.join("\n"));
    client.close().await;
}
