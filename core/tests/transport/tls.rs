//! `rediss://`, `rediss+sentinel://` and `rediss+cluster://`: the Lock over TLS, against
//! redis-servers, a sentinel and a cluster that only listen with TLS.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, Lock, Owner};
use support::free_port;

/// Owner 1 holds `lock`; owner 2 waits for it (subscribed on `client`) and gets it when owner 1
/// releases. Owner 2 holds it afterwards.
async fn release_wakes_a_waiter(client: &Client, lock: &Lock) {
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire_as(
                Owner::new(2),
                &AcquireOptions::new().wait(Duration::from_secs(20)),
            )
            .await
        })
    };
    while client.subscribed_channels() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lock.release_as(Owner::new(1)).await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
}

/// A throwaway private CA and a certificate for 127.0.0.1 signed by it, in a temporary folder
/// (`ca.pem`, `cert.pem`, `key.pem`), removed on drop.
struct Certs {
    dir: std::path::PathBuf,
}

impl Certs {
    fn make(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "crosslock-tls-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let openssl = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl must be installed to make the test certificates");
            assert!(status.success(), "openssl {args:?} failed");
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=crosslock test CA",
            "-keyout",
            "ca-key.pem",
            "-out",
            "ca.pem",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "key.pem",
            "-out",
            "server.csr",
        ]);
        std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "san.ext",
            "-out",
            "cert.pem",
        ]);
        Certs { dir }
    }

    fn ca(&self) -> Vec<u8> {
        std::fs::read(self.dir.join("ca.pem")).unwrap()
    }

    /// The server settings of a TLS-only node (its TLS port, no plain port) that trusts the CA
    /// for its own connections (a replica to its master, a sentinel to the nodes).
    fn server_config(&self, port: u16) -> String {
        format!(
            "port 0\ntls-port {port}\nbind 127.0.0.1\ntls-cert-file {d}/cert.pem\n\
             tls-key-file {d}/key.pem\ntls-ca-cert-file {d}/ca.pem\ntls-auth-clients no\n\
             tls-replication yes\nsave \"\"\nappendonly no\ndir {d}\n\
             repl-diskless-sync-delay 0\nrepl-ping-replica-period 1\n",
            d = self.dir.display()
        )
    }

    /// Runs `redis-cli` over TLS against 127.0.0.1:`port`; its output, trimmed.
    fn cli(&self, port: u16, args: &[&str]) -> String {
        let out = Command::new(support::redis_cli_bin())
            .arg("--tls")
            .arg("--cacert")
            .arg(self.dir.join("ca.pem"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS-only redis-server (or sentinel) from a config file; killed on drop.
struct TlsNode {
    port: u16,
    child: Child,
}

impl TlsNode {
    /// Starts on a free port; tried again on another when the port was taken between picking
    /// and binding it (by a server of a test running alongside: then this one exits, and the
    /// other one answers on the port).
    fn start(certs: &Certs, extra_config: &str, sentinel: bool) -> Self {
        let mut last = String::new();
        for _ in 0..5 {
            // A cluster node's bus port is its port + 10000 (the only one Redis 6.2 has).
            let port = if extra_config.contains("cluster-enabled yes") {
                support::free_cluster_port()
            } else {
                free_port()
            };
            let conf = certs.dir.join(format!("node-{port}.conf"));
            std::fs::write(
                &conf,
                format!("{}{extra_config}", certs.server_config(port)),
            )
            .unwrap();
            let mut cmd = Command::new(support::redis_server_bin());
            cmd.arg(&conf);
            if sentinel {
                cmd.arg("--sentinel");
            }
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed (the test command installs it)");
            match support::await_listening(&mut child, port, "TLS redis-server") {
                Ok(()) => return TlsNode { port, child },
                Err(e) => last = e,
            }
        }
        panic!("TLS redis-server did not start on five free ports: {last}")
    }
}

impl Drop for TlsNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A redis-server that only listens with TLS, with its certificates.
struct TlsRedis {
    port: u16,
    certs: Certs,
    _node: TlsNode,
}

impl TlsRedis {
    fn start() -> Self {
        let certs = Certs::make("server");
        let node = TlsNode::start(&certs, "", false);
        TlsRedis {
            port: node.port,
            certs,
            _node: node,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_works_over_tls() {
    let server = TlsRedis::start();
    // The server's certificate comes from a private CA: trust exactly that CA.
    let ca = server.certs.ca();
    let options = crosslock::ClientOptions::new().tls_ca_cert(ca);
    let client = Client::connect_with(&format!("rediss://127.0.0.1:{}/0", server.port), options)
        .await
        .unwrap();
    let lock = client.lock("tls:lock").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(lock.is_held_by(Owner::new(1)).await.unwrap());
    // A waiter on the same client is woken through the TLS subscription connection.
    release_wakes_a_waiter(&client, &lock).await;
    lock.release_as(Owner::new(2)).await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_redis_url_against_a_tls_port_fails_clearly() {
    let server = TlsRedis::start();
    let options = crosslock::ClientOptions::new().connect_timeout(Duration::from_millis(800));
    let err = Client::connect_with(&format!("redis://127.0.0.1:{}/0", server.port), options)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crosslock::ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{}", server.port)),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_url_against_a_plain_server_asks_whether_tls_is_enabled() {
    let server = support::RedisServer::start();
    let url = server.url().replacen("redis://", "rediss://", 1);
    let options = crosslock::ClientOptions::new().connect_timeout(Duration::from_millis(800));
    let err = Client::connect_with(&url, options).await.unwrap_err();
    assert_eq!(err.kind(), crosslock::ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string().contains("is TLS enabled on the server?"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_certificate_is_refused() {
    let server = TlsRedis::start();
    // Without the CA, the built-in web roots do not trust the private CA's certificate.
    let options = crosslock::ClientOptions::new().connect_timeout(Duration::from_millis(800));
    let err = Client::connect_with(&format!("rediss://127.0.0.1:{}/0", server.port), options)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), crosslock::ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("(TLS)"), "{err}");
}

/// Polls `check` every 50 ms for up to 30 s.
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_over_tls_finds_the_master_and_follows_a_failover() {
    // Master, replica and sentinel all listen with TLS only; the replica and the sentinel reach
    // the nodes over TLS too.
    let certs = Certs::make("sentinel");
    let master = TlsNode::start(&certs, "", false);
    let replica = TlsNode::start(
        &certs,
        &format!("replicaof 127.0.0.1 {}\n", master.port),
        false,
    );
    let sentinel = TlsNode::start(
        &certs,
        &format!(
            "sentinel monitor tlsmaster 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds tlsmaster 1000\n\
             sentinel failover-timeout tlsmaster 4000\n",
            master.port
        ),
        true,
    );
    eventually("the replica did not sync over TLS", || {
        certs
            .cli(replica.port, &["INFO", "replication"])
            .contains("master_link_status:up")
    });
    eventually("the sentinel did not find the replica", || {
        certs
            .cli(sentinel.port, &["SENTINEL", "REPLICAS", "tlsmaster"])
            .contains(&replica.port.to_string())
    });

    let url = format!("rediss+sentinel://127.0.0.1:{}/tlsmaster/0", sentinel.port);
    let options = crosslock::ClientOptions::new()
        .tls_ca_cert(certs.ca())
        .watchdog_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(8));
    let client = Client::connect_with(&url, options).await.unwrap();
    let lock = client.lock("tls:sentinel").unwrap();
    assert!(
        lock.acquire_as(Owner::new(1), &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(
        certs
            .cli(master.port, &["HGETALL", "tls:sentinel"])
            .contains(":1"),
        "the lock is written on the master"
    );
    // A waiter is woken through the TLS subscription connection to the master.
    release_wakes_a_waiter(&client, &lock).await;
    eventually("the hold did not reach the replica", || {
        certs
            .cli(replica.port, &["HGETALL", "tls:sentinel"])
            .contains(":2")
    });

    // The sentinel promotes the replica: the client follows it over TLS; the replicated hold is
    // still held, renewed and released there.
    assert_eq!(
        certs.cli(sentinel.port, &["SENTINEL", "FAILOVER", "tlsmaster"]),
        "OK"
    );
    eventually("the sentinel did not promote the replica", || {
        certs
            .cli(
                sentinel.port,
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "tlsmaster"],
            )
            .contains(&replica.port.to_string())
    });
    eventually("the replica did not become a master", || {
        certs.cli(replica.port, &["ROLE"]).starts_with("master")
    });
    assert!(
        !lock
            .acquire_as(
                Owner::new(3),
                &AcquireOptions::new().wait(Duration::from_millis(300))
            )
            .await
            .unwrap(),
        "the replicated hold still excludes others on the new master"
    );
    // Longer than the lease: the hold lives on because the watchdog renews it on the new master.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(lock.is_held_by(Owner::new(2)).await.unwrap());
    lock.release_as(Owner::new(2)).await.unwrap();
    assert!(
        lock.acquire_as(Owner::new(3), &AcquireOptions::new())
            .await
            .unwrap()
    );
    assert!(
        certs
            .cli(replica.port, &["HGETALL", "tls:sentinel"])
            .contains(":3"),
        "the new hold is written on the new master"
    );
    lock.release_as(Owner::new(3)).await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_over_tls_routes_wakes_and_renews() {
    // Three TLS-only masters whose cluster bus is TLS too (the others serve their slots while
    // one is stopped).
    let certs = Certs::make("cluster");
    let nodes: Vec<TlsNode> = (0..3)
        .map(|_| {
            TlsNode::start(
                &certs,
                &format!(
                    "cluster-enabled yes\ncluster-node-timeout 1000\ntls-cluster yes\n\
                     cluster-require-full-coverage no\ncluster-config-file nodes-{}.conf\n",
                    free_port()
                ),
                false,
            )
        })
        .collect();
    let mut create = Command::new(support::redis_cli_bin());
    create
        .arg("--tls")
        .arg("--cacert")
        .arg(certs.dir.join("ca.pem"))
        .args(["--cluster", "create"]);
    for n in &nodes {
        create.arg(format!("127.0.0.1:{}", n.port));
    }
    let out = create
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "redis-cli --cluster create over TLS failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    eventually("the TLS cluster did not settle", || {
        nodes.iter().all(|n| {
            certs
                .cli(n.port, &["CLUSTER", "INFO"])
                .contains("cluster_state:ok")
        })
    });

    let url = format!(
        "rediss+cluster://127.0.0.1:{},127.0.0.1:{}",
        nodes[0].port, nodes[1].port
    );
    let options = crosslock::ClientOptions::new()
        .tls_ca_cert(certs.ca())
        .watchdog_timeout(Duration::from_millis(900))
        .connect_timeout(Duration::from_secs(8));
    let client = Client::connect_with(&url, options.clone()).await.unwrap();
    // Locks in every master's slots, held past their first lease by the watchdog.
    let names: Vec<String> = (0..20).map(|i| format!("tls:cluster:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.lock(name).unwrap().acquire().await.unwrap());
    }
    let serving: std::collections::HashSet<u16> = names
        .iter()
        .map(|name| {
            let slot: u16 = certs
                .cli(nodes[0].port, &["CLUSTER", "KEYSLOT", name])
                .parse()
                .unwrap();
            nodes
                .iter()
                .find(|n| {
                    certs
                        .cli(n.port, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])
                        .parse::<u64>()
                        .unwrap()
                        > 0
                })
                .map(|n| n.port)
                .expect("every lock is on the master serving its slot")
        })
        .collect();
    assert_eq!(
        serving.len(),
        3,
        "the locks are spread over all three masters"
    );
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(guards.iter().all(|g| !g.is_lost()), "renewed over TLS");

    // A waiter is woken through the (sharded) TLS subscription when the holder releases.
    let lock = client.lock(&names[5]).unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.acquire_as(
                Owner::new(9),
                &AcquireOptions::new().wait(Duration::from_secs(20)),
            )
            .await
        })
    };
    while client.subscribed_channels() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut guards = guards.into_iter();
    for guard in guards.by_ref().take(6) {
        guard.release().await.unwrap();
    }
    assert!(waiter.await.unwrap().unwrap());
    lock.release_as(Owner::new(9)).await.unwrap();
    for guard in guards {
        guard.release().await.unwrap();
    }
    client.close().await;

    // A master stops answering (a hung process) while a client holds 2,000 locks there and one
    // on each other master; the client closes at once. Over TLS it has no slot map of its own
    // (no lanes): it reads one to release each master's holds on their own, so the other
    // masters' locks are released. (With one window of releases in flight for all, the stopped
    // master's filled it, and the others were left to their leases.)
    let client = Client::connect_with(&url, options.watchdog_timeout(Duration::from_secs(30)))
        .await
        .unwrap();
    let slots_of = |node: &TlsNode| -> Vec<(u16, u16)> {
        let nodes = certs.cli(node.port, &["CLUSTER", "NODES"]);
        let myself = nodes.lines().find(|l| l.contains("myself")).unwrap();
        myself
            .split_whitespace()
            .skip(8)
            .filter_map(|range| {
                let (first, last) = range.split_once('-').unwrap_or((range, range));
                Some((first.parse().ok()?, last.parse().ok()?))
            })
            .collect()
    };
    let names_on = |node: &TlsNode, prefix: &str, count: usize| -> Vec<String> {
        let ranges = slots_of(node);
        (0..)
            .map(|i| format!("{prefix}:{i}"))
            .filter(|name| {
                let slot = key_slot(name);
                ranges
                    .iter()
                    .any(|(first, last)| (*first..=*last).contains(&slot))
            })
            .take(count)
            .collect()
    };
    let mut held = Vec::new();
    for name in names_on(&nodes[2], "tls:stuck", 2000) {
        held.push(client.lock(&name).unwrap().acquire().await.unwrap());
    }
    let kept: Vec<(u16, String)> = nodes[..2]
        .iter()
        .map(|node| (node.port, names_on(node, "tls:kept", 1).remove(0)))
        .collect();
    for (_, name) in &kept {
        held.push(client.lock(name).unwrap().acquire().await.unwrap());
    }
    // SAFETY: kill(2) on our own child's pid.
    let stop = |signal| unsafe { libc::kill(nodes[2].child.id() as i32, signal) };
    assert_eq!(stop(libc::SIGSTOP), 0);
    client.close().await;
    let left: Vec<&String> = kept
        .iter()
        .filter(|(port, name)| certs.cli(*port, &["EXISTS", name]) != "0")
        .map(|(_, name)| name)
        .collect();
    assert_eq!(stop(libc::SIGCONT), 0);
    drop(held);
    assert!(
        left.is_empty(),
        "closing the client left {left:?}, on masters that answer, to their leases while \
         another master did not answer"
    );
}

/// The cluster slot of `name` (CRC16/XMODEM mod 16384), for names without a hash tag.
fn key_slot(name: &str) -> u16 {
    let mut crc: u16 = 0;
    for byte in name.bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}
