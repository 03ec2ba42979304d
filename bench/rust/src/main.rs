//! crosslock-bench: the Rust side of crosslock's benchmarks.
//!
//! It uses the core crate directly, with the benchmark loop itself running on crosslock's process
//! runtime (so an acquire's internal task hop stays on the same worker): the ceiling that the
//! Python and Node bindings could reach. `--runtime app` runs the uncontended loop the way a Rust
//! application calls crosslock instead: from a task of its own multi-thread tokio runtime (what
//! `#[tokio::main]` builds), while the connection's I/O stays on crosslock's runtime. `bench/harness.py` runs it; each subcommand prints JSON
//! (one object per line) or speaks the small line protocol the harness uses for multi-process
//! scenarios. `--metrics otel` (uncontended and handoff: the harness's `crosslock+metrics` rows)
//! connects with crosslock's OpenTelemetry metrics on, recorded on an SDK meter; `--spans otel`
//! (the `crosslock+spans` rows) with its spans on, made on an SDK tracer whose simple processor
//! hands each to an exporter that drops it.
//!
//! ```text
//! crosslock-bench uncontended URL --name N --seconds S --repeats R --warmup-batch B [--runtime app] [--metrics otel | --spans otel]
//! crosslock-bench contended   URL --name N --workers W --iters K
//! crosslock-bench holders     URL --name N --n COUNT --watchdog-ms MS      (line protocol)
//! crosslock-bench handoff     URL --name N [--metrics otel | --spans otel] (line protocol)
//! crosslock-bench rtt         URL --name N --calls C --repeats R             (per-call breakdown)
//! ```

// A benchmark program: a bad option or a failed call ends the run loudly, by design.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crosslock::telemetry::{OpenTelemetry, SpanLevel};
use crosslock::{AcquireOptions, Client, ClientOptions, Owner};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::testing::trace::NoopSpanExporter;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// What a client measures: nothing, its metrics, or its spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Otel {
    Off,
    Metrics,
    Spans,
}

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!(
            "usage: crosslock-bench <uncontended|contended|holders|handoff> URL [--key value]..."
        );
        std::process::exit(2);
    }
    let command = args[0].clone();
    let url = args[1].clone();
    let mut opts = HashMap::new();
    let mut rest = args[2..].iter();
    while let Some(key) = rest.next() {
        let Some(key) = key.strip_prefix("--") else {
            eprintln!("unexpected argument {key}");
            std::process::exit(2);
        };
        let value = rest.next().cloned().unwrap_or_default();
        opts.insert(key.to_owned(), value);
    }
    let opt = |k: &str, d: &str| opts.get(k).cloned().unwrap_or_else(|| d.to_owned());
    let metrics = match (opt("metrics", "off").as_str(), opt("spans", "off").as_str()) {
        ("off", "off") => Otel::Off,
        ("otel", "off") => Otel::Metrics,
        ("off", "otel") => Otel::Spans,
        (m, t) => {
            eprintln!("--metrics otel or --spans otel (or neither), not --metrics {m} --spans {t}");
            std::process::exit(2);
        }
    };
    let result = match command.as_str() {
        "uncontended" => uncontended(
            url,
            opt("name", "bench:rust:uncontended"),
            opt("seconds", "1").parse().unwrap(),
            opt("repeats", "5").parse().unwrap(),
            opt("warmup-batch", "1000").parse().unwrap(),
            match opt("runtime", "crosslock").as_str() {
                "crosslock" => false,
                "app" => true,
                other => {
                    eprintln!("--runtime is crosslock or app, not {other}");
                    std::process::exit(2);
                }
            },
            metrics,
        ),
        "contended" => contended(
            url,
            opt("name", "bench:rust:contended"),
            opt("workers", "8").parse().unwrap(),
            opt("iters", "100").parse().unwrap(),
        ),
        "holders" => holders(
            url,
            opt("name", "bench:rust:holders"),
            opt("n", "100").parse().unwrap(),
            opt("watchdog-ms", "3000").parse().unwrap(),
        ),
        "handoff" => handoff(url, opt("name", "bench:rust:handoff"), metrics),
        "rtt" => rtt(
            url,
            opt("name", "bench:rust:rtt"),
            opt("calls", "2000").parse().unwrap(),
            opt("repeats", "3").parse().unwrap(),
        ),
        other => Err(format!("unknown subcommand {other}").into()),
    };
    if let Err(e) = result {
        eprintln!("crosslock-bench {command}: {e}");
        std::process::exit(1);
    }
}

/// Connects to `url`; with `Otel::Metrics`, with crosslock's OpenTelemetry metrics recorded on a
/// meter of the SDK (its periodic reader exports to memory, once a minute: nothing leaves the
/// process, what is measured is the recording); with `Otel::Spans`, with its spans made on a tracer
/// of the SDK (each ended span handed to an exporter that drops it). The providers live as long as
/// the process.
async fn connect(url: &str, otel: Otel) -> crosslock::Result<Client> {
    if otel == Otel::Off {
        return Client::connect(url).await;
    }
    static TRACERS: OnceLock<SdkTracerProvider> = OnceLock::new();
    static PROVIDER: OnceLock<SdkMeterProvider> = OnceLock::new();
    let provider = PROVIDER.get_or_init(|| {
        SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
            .build()
    });
    let meter = provider.meter("crosslock-bench");
    let mut recorder = OpenTelemetry::new(&meter);
    if otel == Otel::Spans {
        let tracers = TRACERS.get_or_init(|| {
            SdkTracerProvider::builder()
                .with_simple_exporter(NoopSpanExporter::new())
                .build()
        });
        recorder = recorder.with_tracer(tracers.tracer("crosslock-bench"), SpanLevel::Acquires);
    }
    Client::connect_with(url, ClientOptions::new().telemetry(recorder.into())).await
}

/// Runs `fut` as a task of a runtime of the application's own, as `#[tokio::main]` builds it (a
/// multi-thread runtime, one worker per CPU), and waits for it.
fn run_in_app<F, T>(fut: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let app = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("an application runtime");
    app.block_on(async move { tokio::spawn(fut).await })
        .expect("benchmark task panicked")
}

/// Runs `fut` as a task on crosslock's runtime and waits for it from this (non-runtime) thread.
fn run<F, T>(fut: F) -> T
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    crosslock::runtime::block_on(crosslock::runtime::spawn(fut)).expect("benchmark task panicked")
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Nearest-rank percentile of sorted nanoseconds, in microseconds.
fn pct_us(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn json_f64s(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:.3}")).collect();
    format!("[{}]", items.join(","))
}

fn uncontended(
    url: String,
    name: String,
    seconds: f64,
    repeats: usize,
    batch: usize,
    in_app: bool,
    metrics: Otel,
) -> Res<()> {
    let bench = async move {
        let client = connect(&url, metrics).await?;
        let lock = client.lock(&name)?;
        // Warm up until two consecutive batches run within 5% of each other.
        let mut rates = Vec::new();
        let warm_start = Instant::now();
        loop {
            let t0 = Instant::now();
            for _ in 0..batch {
                lock.acquire().await?.release().await?;
            }
            rates.push(batch as f64 / t0.elapsed().as_secs_f64());
            let n = rates.len();
            let settled = n >= 3 && (rates[n - 1] - rates[n - 2]).abs() <= 0.05 * rates[n - 2];
            if settled || n >= 20 || warm_start.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        let mut runs = Vec::new();
        for _ in 0..repeats {
            let mut lat = Vec::with_capacity(100_000);
            let start = Instant::now();
            let limit = Duration::from_secs_f64(seconds);
            loop {
                let t0 = Instant::now();
                let guard = lock.acquire().await?;
                guard.release().await?;
                let t1 = Instant::now();
                lat.push((t1 - t0).as_nanos() as u64);
                if t1 - start >= limit {
                    break;
                }
            }
            let elapsed = start.elapsed().as_secs_f64();
            let pairs = lat.len();
            lat.sort_unstable();
            runs.push(format!(
                "{{\"pairs\":{pairs},\"seconds\":{elapsed:.6},\"pairs_per_s\":{:.3},\"p50_us\":{:.3},\"p99_us\":{:.3}}}",
                pairs as f64 / elapsed,
                pct_us(&lat, 0.50),
                pct_us(&lat, 0.99)
            ));
        }
        client.close().await;
        println!(
            "{{\"runs\":[{}],\"warmup\":{{\"batch\":{batch},\"rates\":{}}}}}",
            runs.join(","),
            json_f64s(&rates)
        );
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    };
    if in_app {
        run_in_app(bench)
    } else {
        run(bench)
    }
}

fn contended(url: String, name: String, workers: usize, iters: usize) -> Res<()> {
    run(async move {
        let client = Client::connect(&url).await?;
        let raw = redis::Client::open(url.as_str())?;
        let mut con = raw.get_multiplexed_async_connection().await?;
        let counter = format!("{name}:counter");
        redis::cmd("SET")
            .arg(&counter)
            .arg(0)
            .query_async::<()>(&mut con)
            .await?;
        // Load the scripts before the clock starts, as every other library's first call does.
        client.lock(&name)?.acquire().await?.release().await?;
        let barrier = Arc::new(tokio::sync::Barrier::new(workers + 1));
        let mut tasks = Vec::new();
        for _ in 0..workers {
            let lock = client.lock(&name)?;
            let mut con = con.clone();
            let counter = counter.clone();
            let barrier = barrier.clone();
            tasks.push(crosslock::runtime::spawn(async move {
                barrier.wait().await;
                let mut max_wait = 0u64;
                let mut done = 0usize;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    let guard = lock.acquire().await?;
                    max_wait = max_wait.max(t0.elapsed().as_nanos() as u64);
                    let v: Option<i64> = redis::cmd("GET")
                        .arg(&counter)
                        .query_async(&mut con)
                        .await?;
                    redis::cmd("SET")
                        .arg(&counter)
                        .arg(v.unwrap_or(0) + 1)
                        .query_async::<()>(&mut con)
                        .await?;
                    guard.release().await?;
                    done += 1;
                }
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((done, max_wait))
            }));
        }
        barrier.wait().await;
        let start = Instant::now();
        let mut done = 0;
        let mut max_wait = 0u64;
        for task in tasks {
            let (d, w) = task.await??;
            done += d;
            max_wait = max_wait.max(w);
        }
        let elapsed = start.elapsed().as_secs_f64();
        let value: Option<i64> = redis::cmd("GET")
            .arg(&counter)
            .query_async(&mut con)
            .await?;
        client.close().await;
        println!(
            "{{\"ops\":{done},\"seconds\":{elapsed:.6},\"ops_per_s\":{:.3},\"counter\":{},\"expected\":{},\"max_wait_ms\":{:.3}}}",
            done as f64 / elapsed,
            value.unwrap_or(0),
            workers * iters,
            max_wait as f64 / 1e6
        );
        Ok(())
    })
}

fn read_command() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn holders(url: String, name: String, n: usize, watchdog_ms: u64) -> Res<()> {
    let options = ClientOptions::new().watchdog_timeout(Duration::from_millis(watchdog_ms));
    let client = run(async move { Client::connect_with(&url, options).await })?;
    say(&format!("connected {}", rss_kb()));
    let c = client.clone();
    let started = Instant::now();
    run(async move {
        let owner = Owner::new(1);
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            let lock = c.lock(&format!("{name}:{i}"))?;
            set.spawn(async move { lock.acquire_as(owner, &AcquireOptions::new()).await });
            if set.len() >= 256 && !set.join_next().await.expect("a task")?? {
                return Err("an acquire timed out".into());
            }
        }
        while let Some(r) = set.join_next().await {
            if !r?? {
                return Err("an acquire timed out".into());
            }
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    })?;
    say(&format!(
        "held {n} {} {} {:.3}",
        client.watched_locks(),
        rss_kb(),
        started.elapsed().as_secs_f64()
    ));
    while let Some(cmd) = read_command() {
        match cmd.as_str() {
            "report" => say(&format!("report {} {}", client.watched_locks(), rss_kb())),
            "quit" => break,
            _ => say("error unknown command"),
        }
    }
    let c = client.clone();
    run(async move { c.close().await });
    say("bye");
    Ok(())
}

fn handoff(url: String, name: String, metrics: Otel) -> Res<()> {
    let client = run(async move { connect(&url, metrics).await })?;
    let lock = client.lock(&name)?;
    let owner = Owner::new(1);
    say("ready");
    while let Some(cmd) = read_command() {
        let mut parts = cmd.split_whitespace();
        match parts.next() {
            Some("acquire") => {
                say("waiting");
                let l = lock.clone();
                // Timestamps are taken inside the runtime task, as a Rust program would see them;
                // this thread only relays the protocol.
                let (ok, t) = run(async move {
                    let ok = l.acquire_as(owner, &AcquireOptions::new()).await?;
                    Ok::<_, crosslock::Error>((ok, monotonic_ns()))
                })?;
                if !ok {
                    return Err("acquire gave up".into());
                }
                say(&format!("acquired {t}"));
            }
            Some("release") => {
                let delay_us: u64 = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
                let l = lock.clone();
                let t = run(async move {
                    tokio::time::sleep(Duration::from_micros(delay_us)).await;
                    let t = monotonic_ns();
                    l.release_as(owner).await?;
                    Ok::<_, crosslock::Error>(t)
                })?;
                say(&format!("released {t}"));
            }
            Some("quit") => break,
            _ => say("error unknown command"),
        }
    }
    let c = client.clone();
    run(async move { c.close().await });
    say("bye");
    Ok(())
}

/// The floor script of the harness: what one EVALSHA round trip costs through redis-rs.
const FLOOR_SCRIPT: &str =
    "redis.call('hset', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], ARGV[2]); return nil";

/// Per-call latency of single operations, to see where a pair's time goes.
fn rtt(url: String, name: String, calls: usize, repeats: usize) -> Res<()> {
    let u = url.clone();
    let (client, lock, out) = run(async move {
        let url = u;
        let client = Client::connect(&url).await?;
        let lock = client.lock(&name)?;
        let raw = redis::Client::open(url.as_str())?;
        let mut con = raw.get_multiplexed_async_connection().await?;
        let script = redis::Script::new(FLOOR_SCRIPT);
        let floor_key = format!("{name}:floor");
        let owner = Owner::new(1);
        let lease = AcquireOptions::new().lease(Duration::from_secs(10));
        let watchdog = AcquireOptions::new();
        let mut out: Vec<(String, Vec<Vec<u64>>)> = Vec::new();
        let names = [
            "redis-rs PING",
            "redis-rs EVALSHA",
            "crosslock is_locked()",
            "crosslock acquire (watchdog)",
            "crosslock release (watchdog)",
            "crosslock acquire (lease)",
            "crosslock release (lease)",
        ];
        for n in names {
            out.push((n.to_owned(), Vec::new()));
        }
        for rep in 0..=repeats {
            // Round 0 warms up and is thrown away.
            let mut lat: Vec<Vec<u64>> = vec![Vec::with_capacity(calls); names.len()];
            for _ in 0..calls {
                let t = Instant::now();
                redis::cmd("PING").query_async::<()>(&mut con).await?;
                lat[0].push(t.elapsed().as_nanos() as u64);
                let t = Instant::now();
                script
                    .key(&floor_key)
                    .arg("f")
                    .arg(30000)
                    .invoke_async::<()>(&mut con)
                    .await?;
                lat[1].push(t.elapsed().as_nanos() as u64);
                let t = Instant::now();
                lock.is_locked().await?;
                lat[2].push(t.elapsed().as_nanos() as u64);
                for (i, opts) in [(3, &watchdog), (5, &lease)] {
                    let t = Instant::now();
                    lock.acquire_as(owner, opts).await?;
                    lat[i].push(t.elapsed().as_nanos() as u64);
                    let t = Instant::now();
                    lock.release_as(owner).await?;
                    lat[i + 1].push(t.elapsed().as_nanos() as u64);
                }
            }
            if rep > 0 {
                for (i, l) in lat.into_iter().enumerate() {
                    out[i].1.push(l);
                }
            }
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((client, lock, out))
    })?;
    // The same one-round-trip query driven from a plain thread, as a binding's sync call is:
    // spawned on the runtime and waited for (what the Python binding does), or run with
    // `block_on` on the calling thread (no spawn).
    let mut spawned = Vec::new();
    let mut blocked = Vec::new();
    for rep in 0..=repeats {
        let mut a = Vec::with_capacity(calls);
        let mut b = Vec::with_capacity(calls);
        for _ in 0..calls {
            let l = lock.clone();
            let t = Instant::now();
            run(async move { l.is_locked().await })?;
            a.push(t.elapsed().as_nanos() as u64);
            let t = Instant::now();
            crosslock::runtime::block_on(lock.is_locked())?;
            b.push(t.elapsed().as_nanos() as u64);
        }
        if rep > 0 {
            spawned.push(a);
            blocked.push(b);
        }
    }
    let mut out = out;
    out.push((
        "crosslock is_locked() from a thread: spawn + wait".to_owned(),
        spawned,
    ));
    out.push((
        "crosslock is_locked() from a thread: block_on".to_owned(),
        blocked,
    ));
    let costs = costs(&url, &lock, calls)?;
    let c = client.clone();
    run(async move { c.close().await });
    {
        let items: Vec<String> = out
            .into_iter()
            .map(|(n, reps)| {
                let p50: Vec<f64> = reps
                    .iter()
                    .map(|l| {
                        let mut l = l.clone();
                        l.sort_unstable();
                        pct_us(&l, 0.5)
                    })
                    .collect();
                let mean: Vec<f64> = reps
                    .iter()
                    .map(|l| l.iter().sum::<u64>() as f64 / l.len().max(1) as f64 / 1000.0)
                    .collect();
                format!(
                    "{{\"op\":\"{n}\",\"p50_us\":{},\"mean_us\":{}}}",
                    json_f64s(&p50),
                    json_f64s(&mean)
                )
            })
            .collect();
        println!(
            "{{\"ops\":[{}],\"costs\":[{}]}}",
            items.join(","),
            costs.join(",")
        );
    }
    Ok(())
}

/// (CPU seconds, context switches) of the whole process so far: every thread, runtime included.
fn usage() -> (f64, i64) {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        secs(ru.ru_utime) + secs(ru.ru_stime),
        ru.ru_nvcsw + ru.ru_nivcsw,
    )
}

/// CPU time and context switches per call, each operation in a block of its own.
fn costs(url: &str, lock: &crosslock::Lock, calls: usize) -> Res<Vec<String>> {
    let mut out = Vec::new();
    let mut record = |op: &str, wall: Duration, (c0, s0): (f64, i64), (c1, s1): (f64, i64)| {
        out.push(format!(
            "{{\"op\":\"{op}\",\"wall_us\":{:.3},\"cpu_us\":{:.3},\"cs\":{:.4}}}",
            wall.as_secs_f64() * 1e6 / calls as f64,
            (c1 - c0) * 1e6 / calls as f64,
            (s1 - s0) as f64 / calls as f64
        ));
    };
    // In a task on the runtime (as a Rust program would call it).
    let (url2, l) = (url.to_owned(), lock.clone());
    let measured = run(async move {
        let raw = redis::Client::open(url2.as_str())?;
        let mut con = raw.get_multiplexed_async_connection().await?;
        let script = redis::Script::new(FLOOR_SCRIPT);
        let owner = Owner::new(2);
        let lease = AcquireOptions::new().lease(Duration::from_secs(10));
        let mut rows = Vec::new();
        for op in 0..5 {
            let mut measured = None;
            for n in phases(calls) {
                let (u0, t0) = (usage(), Instant::now());
                for _ in 0..n {
                    match op {
                        0 => redis::cmd("PING").query_async::<()>(&mut con).await?,
                        1 => {
                            script
                                .key("bench:rust:costs")
                                .arg("f")
                                .arg(30000)
                                .invoke_async::<()>(&mut con)
                                .await?
                        }
                        2 => {
                            l.is_locked().await?;
                        }
                        3 => {
                            l.acquire_as(owner, &AcquireOptions::new()).await?;
                            l.release_as(owner).await?;
                        }
                        _ => {
                            l.acquire_as(owner, &lease).await?;
                            l.release_as(owner).await?;
                        }
                    }
                }
                measured = Some((t0.elapsed(), u0, usage()));
            }
            rows.push(measured.expect("measured"));
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(rows)
    })?;
    let names = [
        "redis-rs PING",
        "redis-rs EVALSHA",
        "crosslock is_locked()",
        "crosslock pair (watchdog)",
        "crosslock pair (lease)",
    ];
    for (name, (wall, u0, u1)) in names.iter().zip(measured) {
        record(name, wall, u0, u1);
    }
    // From a plain thread, as a binding's sync call: spawn + wait, and block_on.
    for (name, spawn) in [
        ("crosslock is_locked() from a thread: spawn + wait", true),
        ("crosslock is_locked() from a thread: block_on", false),
    ] {
        let mut result = None;
        for n in phases(calls) {
            let (u0, t0) = (usage(), Instant::now());
            for _ in 0..n {
                if spawn {
                    let l = lock.clone();
                    run(async move { l.is_locked().await })?;
                } else {
                    crosslock::runtime::block_on(lock.is_locked())?;
                }
            }
            result = Some((t0.elapsed(), u0, usage()));
        }
        let (wall, u0, u1) = result.expect("measured");
        record(name, wall, u0, u1);
    }
    // From a task of the application's own runtime, as a Rust program calls it.
    let l = lock.clone();
    let (wall, u0, u1) = run_in_app(async move {
        let owner = Owner::new(3);
        let mut result = None;
        for n in phases(calls) {
            let (u0, t0) = (usage(), Instant::now());
            for _ in 0..n {
                l.acquire_as(owner, &AcquireOptions::new()).await?;
                l.release_as(owner).await?;
            }
            result = Some((t0.elapsed(), u0, usage()));
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(result.expect("measured"))
    })?;
    record(APP_PAIR, wall, u0, u1);
    Ok(out)
}

/// A cost measurement's two blocks: a warm-up (a tenth, at least 10 calls), then the `calls`
/// measured (the last block's figures are kept).
fn phases(calls: usize) -> [usize; 2] {
    [(calls / 10).max(10), calls]
}

/// The breakdown's name for an acquire + release pair called from an application's runtime.
const APP_PAIR: &str = "crosslock pair (watchdog), from the application's runtime";
