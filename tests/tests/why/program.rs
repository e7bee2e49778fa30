//! The program under test: built once per test run, run on a fresh device, and its `dump`
//! read back as events.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use ttrace_tests::cli::Cli;

/// Requests of each kind per run.
pub const EACH: u32 = 4;

/// The span name of each kind's requests, as readers name them (`target::name`).
pub fn span_of(kind: &str) -> String {
    format!("ttrace_test_why::{kind}")
}

/// The program, built (once per test binary) with `--cfg tokio_unstable` into
/// `<target>/why`, offline from its own `Cargo.lock`.
pub fn binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .unwrap()
            .join("why");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = std::process::Command::new(cargo)
            .args(["build", "--offline", "--manifest-path"])
            .arg(workspace.join("tests/why/Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env("RUSTFLAGS", "--cfg tokio_unstable")
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "ttrace-test-why does not build:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        target.join("debug/ttrace-test-why")
    })
}

/// How a run sees the kernel's view of its threads.
#[derive(Clone, Copy, Debug)]
pub enum Sched {
    /// `TTRACE_SCHED=1`: the switches recorded.
    On,
    /// `TTRACE_SCHED=0`: not asked for.
    Off,
    /// `TTRACE_SCHED=1`, and the kernel refuses `perf_event_open` (`--refuse-perf`: a
    /// seccomp filter the program installs, `EACCES`).
    Refused,
}

/// Runs the program (all four kinds, [`EACH`] of each) on a fresh device under `tmp`, the
/// kernel's view as `sched` says, and returns the device's directory.
pub fn run(tmp: &Path, sched: Sched) -> PathBuf {
    let dev = tmp.join("dev");
    let (env, refuse) = match sched {
        Sched::On => ("1", false),
        Sched::Off => ("0", false),
        Sched::Refused => ("1", true),
    };
    Cli::new(binary().to_str().unwrap())
        .args(["--each", &EACH.to_string()])
        .args(refuse.then_some("--refuse-perf"))
        .env("TTRACE_DIR", &dev)
        .env("TTRACE_BUFFER", "4m")
        .env("TTRACE_SCHED", env)
        .within(std::time::Duration::from_secs(120))
        .succeeds();
    dev
}

/// One event of `dump`.
#[derive(Clone, Debug)]
pub struct Event {
    /// Seconds since the device's first event.
    pub at: f64,
    pub tid: u32,
    /// The thread's name, as dump shows it (15 bytes at most).
    pub thread: String,
    /// The tracepoint's name: a span's `target::name`, a point's name.
    pub name: String,
    /// A span's step (`new`, `enter`, `exit`, `close`, ...); empty for a point.
    pub step: String,
    /// The arguments, as dump shows them.
    pub args: String,
}

impl Event {
    /// The value of argument `key`, as dump shows it.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args
            .split(' ')
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
    }

    /// A span step's instance id (dump shows it in hex).
    pub fn span(&self) -> Option<u64> {
        u64::from_str_radix(self.arg("span")?.strip_prefix("0x")?, 16).ok()
    }
}

const LEVELS: [&str; 5] = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"];

/// The events of the device at `dev`, in dump's order, and dump's first line.
pub fn events(dev: &Path) -> (String, Vec<Event>) {
    let dump = ttrace_tests::reader!("dump", dev).ok();
    let mut lines = dump.lines();
    let header = lines.next().unwrap_or_default().to_string();
    let events = lines.filter_map(parse).collect();
    (header, events)
}

/// An event line of dump: `time cpu pid/tid (thread) [LEVEL] name(args)` for a point,
/// `... [LEVEL] target::name step(args)` for a span's step; `None` for another line.
fn parse(line: &str) -> Option<Event> {
    let mut words = line.split_whitespace();
    let at: f64 = words.next()?.parse().ok()?;
    let _cpu = words.next()?.strip_prefix("cpu")?;
    let tid = words.next()?.split_once('/')?.1.parse().ok()?;
    let thread = words.next()?;
    let thread = thread.strip_prefix('(')?.strip_suffix(')')?.to_string();
    let mut rest: Vec<&str> = words.collect();
    if rest.first().is_some_and(|w| LEVELS.contains(w)) {
        rest.remove(0);
    }
    let rest = rest.join(" ");
    let (head, args) = rest.split_once('(')?;
    let args = args.strip_suffix(')').unwrap_or(args).to_string();
    let (name, step) = match head.split_once(' ') {
        Some((name, step)) => (name.to_string(), step.to_string()),
        None => (head.to_string(), String::new()),
    };
    Some(Event {
        at,
        tid,
        thread,
        name,
        step,
        args,
    })
}
