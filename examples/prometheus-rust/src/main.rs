//! A crosslock client's lock metrics served to Prometheus: the core's OpenTelemetry recorder
//! (the feature `opentelemetry`) on an SDK meter provider whose reader is the OpenTelemetry
//! Prometheus exporter, its registry encoded as Prometheus text on `GET /metrics`.
//!
//! Usage: `crosslock-example-prometheus [REDIS_URL] [PORT]` (or the environment's `REDIS_URL` and
//! `METRICS_PORT`; defaults `redis://127.0.0.1:6379/0` and 9464, port 0 picks a free one). It
//! prints the address it serves on, does a few lock operations (an uncontended acquire and
//! release, a wait that times out, a contended acquire), prints `done`, and serves until stopped
//! (Ctrl-C, SIGTERM).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crosslock::telemetry::OpenTelemetry;
use crosslock::{AcquireOptions, Client, ClientOptions};
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use prometheus::{Encoder, Registry, TextEncoder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .or_else(|| std::env::var("REDIS_URL").ok())
        .unwrap_or_else(|| "redis://127.0.0.1:6379/0".into());
    let port: u16 = args
        .next()
        .or_else(|| std::env::var("METRICS_PORT").ok())
        .unwrap_or_else(|| "9464".into())
        .parse()?;

    let registry = Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()?;
    let provider = SdkMeterProvider::builder().with_reader(exporter).build();
    let meter = provider.meter("crosslock-example");

    let listener = TcpListener::bind(("127.0.0.1", port))?;
    println!(
        "serving metrics on http://{}/metrics",
        listener.local_addr()?
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if let Err(e) = serve(stream, &registry) {
                eprintln!("a scrape failed: {e}");
            }
        }
    });

    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(operations(&url, OpenTelemetry::new(&meter)))?;
    println!("done: 1 uncontended acquire, 1 wait timed out, 1 contended acquire");
    // Serves until the process is stopped.
    loop {
        std::thread::park();
    }
}

/// The lock operations whose metrics are served.
async fn operations(url: &str, recorder: OpenTelemetry) -> crosslock::Result<()> {
    let ours = Client::connect_with(url, ClientOptions::new().telemetry(recorder.into())).await?;
    let theirs = Client::connect(url).await?;
    let lock = ours.lock("example:orders")?;

    // Uncontended: taken at once, given back.
    lock.acquire().await?.release().await?;

    // Another client holds it: a wait of 100 ms times out.
    let held = theirs.lock("example:orders")?.acquire().await?;
    let short = AcquireOptions::new().wait(Duration::from_millis(100));
    assert!(lock.try_acquire_with(short).await?.is_none());

    // Contended: released 300 ms into the wait, which its release message wakes.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.release().await
    });
    let long = AcquireOptions::new().wait(Duration::from_secs(10));
    let guard = lock.acquire_with(long).await?;
    release.await.expect("the releasing task ended")?;
    guard.release().await?;

    theirs.close().await;
    ours.close().await;
    Ok(())
}

/// Answers one HTTP request: the registry as Prometheus text for `GET /metrics`, 404 otherwise.
fn serve(stream: TcpStream, registry: &Registry) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The headers, up to the empty line.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut stream = reader.into_inner();
    let (status, body, kind) = if request.starts_with("GET /metrics ") {
        let encoder = TextEncoder::new();
        let mut body = Vec::new();
        encoder
            .encode(&registry.gather(), &mut body)
            .map_err(std::io::Error::other)?;
        ("200 OK", body, encoder.format_type().to_owned())
    } else {
        (
            "404 Not Found",
            b"not found\n".to_vec(),
            "text/plain".to_owned(),
        )
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)
}
