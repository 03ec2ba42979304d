//! `rediss://`: the Lock over TLS, against a redis-server that only listens with TLS.

// Tests fail loudly: an unwrap outside a #[test] fn is still a test helper.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crosslock::{AcquireOptions, Client, Owner};

struct TlsRedis {
    port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl TlsRedis {
    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("crosslock-tls-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A throwaway private CA, and a server certificate for 127.0.0.1 signed by it.
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
        let child = Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .arg("--tls-cert-file")
            .arg(dir.join("cert.pem"))
            .arg("--tls-key-file")
            .arg(dir.join("key.pem"))
            .args([
                "--tls-auth-clients",
                "no",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "TLS redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        TlsRedis { port, child, dir }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_works_over_tls() {
    let server = TlsRedis::start();
    // The server's certificate comes from a private CA: trust exactly that CA.
    let ca = std::fs::read(server.dir.join("ca.pem")).unwrap();
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
