//! `ttrace-reader watch`: follows a device and saves it when a rule matches
//! (`--on 'latency request > 5ms'`), so that the moment is kept after the rings have
//! overwritten it.
//!
//! It follows as `follow` does ([`devttrace::Follower`]: each poll reads only what is new,
//! idle polls back off) and gives each poll to a [`crate::matcher::Matcher`]. A match opens
//! a snapshot that waits `--after` (in the device's clock, from the matching event) so that
//! its consequences are in it, then saves what the watcher read into the snapshot directory
//! with the rule and what matched as its cause, applies the retention limits and prints one
//! line. What it saves is its own copy of the rings ([`devttrace::Shadow`]: every event it
//! read, at its position, with the strings it copied), not the device as it is when the snapshot
//! is due: a watcher that fell behind the writers still saves the moment it matched, with
//! what it lost counted lost. The copy is a window of its own: it holds `--before` (with
//! `--after`, an `--interval` a match may be put off by, and the follower's reorder window),
//! where the device's rings hold less, in at
//! most half of `--max-bytes` beyond the rings' size (a snapshot of it then fits the
//! directory's limit); past that, a ring's worth.
//! Rate: at most one snapshot per `--interval`, measured between the matching events;
//! matches while a snapshot waits are merged into it, a match sooner after the last one is
//! put off to an interval after it (its copy then holds the match if it keeps an
//! interval), one older than the last is merged; all are counted, in the footer and in the
//! device's snapshot counters (as
//! a program's saver counts its own: `stats` shows them), where this user may change the
//! device.
//!
//! `--exec CMD` runs `sh -c CMD` after each snapshot, with `TTRACE_SNAPSHOT` and
//! `TTRACE_RULE` in its environment. It is not waited for in the poll loop (a slow command
//! never holds up the follower); finished ones are reaped at each poll, and `watch` waits
//! for those still running before it ends.

use super::open::{absent, announce, open, refusal, trust};
use crate::decode;
use crate::export::post::Endpoint;
use crate::matcher::Matcher;
use crate::output::quiet_pipe;
use crate::policy::{default_snapshot_dir, parse_bytes, parse_duration, Policy};
use crate::rules::Rule;
use crate::store::Store;
use crate::Error;
use devttrace::{Counter, Follower, Reader};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;
use ttrace_layouts::snapshot::{Cause, CauseKind};

/// How `watch` runs, as given on the command line.
pub(super) struct WatchOptions {
    /// The rules (`--on`), as written.
    pub(super) rules: Vec<String>,
    /// The snapshot directory (`-o`).
    pub(super) output: Option<PathBuf>,
    /// `--before`, `--after`, `--interval`: durations as written.
    pub(super) before: Option<String>,
    pub(super) after: Option<String>,
    pub(super) interval: Option<String>,
    /// `--keep`.
    pub(super) keep: Option<usize>,
    /// `--max-bytes`, a size as written.
    pub(super) max_bytes: Option<String>,
    /// `--exec`.
    pub(super) exec: Option<String>,
    /// `--count`: end after this many snapshots.
    pub(super) count: Option<u64>,
    /// `--interval-ms`: between polls while events come.
    pub(super) interval_ms: u64,
    /// `--wait`: wait for the device and for the tracepoints the rules name.
    pub(super) wait: bool,
    /// `--otlp-endpoint`: where each snapshot's spans are sent.
    pub(super) otlp_endpoint: Option<String>,
}

/// Set when an ending signal came: `watch` saves what it has pending, prints its footer and
/// ends. Relaxed: a flag read at the next poll, ordering nothing.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// What the watcher counted.
#[derive(Default)]
struct Counts {
    matches: u64,
    snapshots: u64,
    merged: u64,
    put_off: u64,
    failed: u64,
}

/// A snapshot granted, waiting for its `--after` span.
struct Pending {
    /// The rule's index.
    rule: usize,
    /// What matched.
    what: String,
    /// The matching event's time (device clock).
    stamp: u64,
    /// When the interval that matched began (a latency rule's), if one did.
    begin: Option<u64>,
    /// When it is due (device clock).
    due: u64,
    /// Matches merged into it.
    merged: u64,
}

/// Parses a duration option.
fn duration(
    option: &'static str,
    text: Option<String>,
    default: Duration,
) -> Result<Duration, Error> {
    match text {
        None => Ok(default),
        Some(t) => parse_duration(&t).ok_or(Error::WatchOption {
            option,
            text: t,
            why: "not a duration (a number and a unit: ns, us, ms, s, m)",
        }),
    }
}

/// The policy the options give (defaults: [`Policy::default`]).
fn policy(o: &mut WatchOptions) -> Result<Policy, Error> {
    let d = Policy::default();
    let max_bytes = match o.max_bytes.take() {
        None => d.max_bytes,
        Some(t) => parse_bytes(&t).ok_or(Error::WatchOption {
            option: "--max-bytes",
            text: t,
            why: "not a size (a number, with k, m or g for binary units)",
        })?,
    };
    if o.keep == Some(0) {
        return Err(Error::WatchOption {
            option: "--keep",
            text: "0".into(),
            why: "keep at least 1 snapshot",
        });
    }
    Ok(Policy {
        after: duration("--after", o.after.take(), d.after)?,
        before: duration("--before", o.before.take(), d.before)?,
        interval: duration("--interval", o.interval.take(), d.interval)?,
        max_files: o.keep.unwrap_or(d.max_files),
        max_bytes,
    })
}

/// `watch`: follows `device`, saving a snapshot when a rule matches, until `--count`
/// snapshots or an ending signal.
pub(super) fn run(device: Option<PathBuf>, mut opts: WatchOptions) -> Result<(), Error> {
    if opts.interval_ms == 0 {
        return Err(Error::WatchOption {
            option: "--interval-ms",
            text: "0".into(),
            why: "give at least 1 (the milliseconds between two polls)",
        });
    }
    let rules = opts
        .rules
        .iter()
        .map(|r| r.parse::<Rule>())
        .collect::<Result<Vec<Rule>, _>>()?;
    let policy = policy(&mut opts)?;
    let otlp = opts
        .otlp_endpoint
        .as_deref()
        .map(Endpoint::parse)
        .transpose()?;
    crate::signals::take().on_signal(|_| STOPPED.store(true, Relaxed));
    let poll_interval = Duration::from_millis(opts.interval_ms);
    let (dev, created) = match opts.wait {
        false => (open(device)?, false),
        true => {
            match wait_for_device(device.unwrap_or_else(devttrace::default_dir), poll_interval)? {
                Some(found) => found,
                None => return Ok(()),
            }
        }
    };
    if dev.is_snapshot() {
        return Err(Error::WatchSnapshot(dev.dir().to_path_buf()));
    }
    // Following begins here, before waiting for the rules' tracepoints: the event that
    // registers one is the first of its kind (a first request that is slow), and must be
    // read. A device created while the watcher waited for it is all new: followed from its
    // start.
    let mut follower = match created {
        true => Follower::from_start(&dev, devttrace::DEFAULT_WINDOW_NS),
        false => Follower::new(&dev),
    };
    // Its copy holds `--before` (and what comes until the snapshot is due: `--after`, and
    // the reorder window the follower holds events for), in at most half the directory's
    // limit beyond the rings' size, so that a snapshot of it fits the limit.
    // A match put off by the rate is saved an interval after the last snapshot: the copy
    // keeps that too, so that its moment is still in it then.
    let window = policy.before
        + policy.interval
        + policy.after
        + Duration::from_nanos(devttrace::DEFAULT_WINDOW_NS);
    follower.keep_copy(
        window.as_nanos().min(u64::MAX as u128) as u64,
        policy.max_bytes / 2,
    );
    if !wait_for_tracepoints(&dev, &rules, opts.wait, poll_interval)? {
        return Ok(());
    }
    let store = Store::new(
        opts.output
            .clone()
            .unwrap_or_else(|| default_snapshot_dir(dev.dir())),
    );
    // The device's snapshot counters count this watcher's snapshots too (`stats` shows
    // what every saver of the device did): through a handle that may change the device,
    // where this user may (else the counts stay the watcher's own, in its footer).
    let counters = devttrace::Device::attach_with(dev.dir(), trust()).ok();
    let mut watcher = Watcher {
        dev: &dev,
        counters,
        rules: rules.iter().map(Rule::to_string).collect(),
        matcher: Matcher::new(rules),
        store,
        policy,
        exec: opts.exec.clone(),
        otlp,
        children: Vec::new(),
        counts: Counts::default(),
        pending: None,
        last_granted: None,
    };
    watcher.watch(&opts, follower)
}

/// Opens the device at `dir`, waiting while there is none (`--wait`: the program that
/// creates it may start after the watcher), and says whether it waited (the device was
/// created since); `None` if an ending signal came first.
fn wait_for_device(dir: PathBuf, interval: Duration) -> Result<Option<(Reader, bool)>, Error> {
    let mut said = false;
    loop {
        match Reader::open_with(&dir, trust()) {
            Ok(dev) => {
                announce(&dev);
                return Ok(Some((dev, said)));
            }
            Err(e) if absent(&e) && !dir.is_file() => {
                if !said {
                    say(format!(
                        "# waiting for {} to be created (watch --wait)",
                        dir.display()
                    ))?;
                    said = true;
                }
            }
            Err(e) => return Err(refusal(e)),
        }
        if STOPPED.load(Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(interval);
    }
}

/// Checks `rules` against the tracepoints of `dev`; with `wait`, a rule that names a
/// tracepoint not registered yet is waited for (a program registers its tracepoints as it
/// starts) instead of being an error. `false` if an ending signal came first.
fn wait_for_tracepoints(
    dev: &Reader,
    rules: &[Rule],
    wait: bool,
    interval: Duration,
) -> Result<bool, Error> {
    let mut said = false;
    loop {
        let meta = dev.metadata();
        let mut missing = Vec::new();
        for r in rules {
            match r.check(&meta) {
                Ok(()) => {}
                Err(e) if wait && e.is_missing_tracepoint() => missing.push((r.to_string(), e)),
                Err(error) => {
                    return Err(Error::RuleOn {
                        device: dev.dir().to_path_buf(),
                        error,
                    })
                }
            }
        }
        if missing.is_empty() {
            return Ok(true);
        }
        if !said {
            let rules: Vec<&str> = missing.iter().map(|(r, _)| r.as_str()).collect();
            say(format!(
                "# waiting for the tracepoints of {} to be registered (watch --wait)",
                rules.join("; ")
            ))?;
            // A name the device already has something close to is more likely a typo
            // than a tracepoint still to come: say so, and wait all the same.
            for (rule, e) in &missing {
                if let Some(near) = e.nearest() {
                    say(format!(
                        "# {rule}: no {} yet; did you mean {near}?",
                        e.name()
                    ))?;
                }
            }
            said = true;
        }
        if STOPPED.load(Relaxed) {
            return Ok(false);
        }
        std::thread::sleep(interval);
    }
}

/// A running watch.
struct Watcher<'d> {
    dev: &'d Reader,
    /// The device, to count its snapshots in ([`Watcher::count`]), where it can be changed.
    counters: Option<devttrace::Device>,
    /// The rules in their canonical words.
    rules: Vec<String>,
    matcher: Matcher,
    store: Store,
    policy: Policy,
    exec: Option<String>,
    /// `--otlp-endpoint`.
    otlp: Option<Endpoint>,
    /// `--exec` commands still running.
    children: Vec<Child>,
    counts: Counts,
    pending: Option<Pending>,
    /// The matching event's time of the last snapshot granted (device clock).
    last_granted: Option<u64>,
}

/// A snapshot cut from the follower's copy (or copied from the device), to be written
/// on a thread of its own while the follower goes on ([`Watcher::cut`]).
struct Cut {
    p: Pending,
    /// When it was taken (UTC ns), as its name and line say.
    at: u64,
    path: PathBuf,
    cause: Cause,
    /// The window, cut from the follower's copy of the rings.
    window: devttrace::shadow::Shadow,
}

/// A [`Cut`] written: its file, or why not, and the events it holds.
struct Written {
    cut: Cut,
    saved: Result<(), Error>,
    events: Option<u64>,
}

impl Cut {
    /// Writes its file (on a thread of its own: the follower goes on meanwhile).
    fn write(self, dev: &Reader) -> Written {
        let saved = dev.save_shadow(&self.path, &self.cause, &self.window);
        let events = saved.is_ok().then(|| events_in(&self.path)).flatten();
        Written {
            saved: saved.map(drop).map_err(Error::from),
            events,
            cut: self,
        }
    }
}

impl Watcher<'_> {
    fn watch(&mut self, opts: &WatchOptions, follower: Follower<'_>) -> Result<(), Error> {
        // Each snapshot is written on a thread of this scope, one at a time, while the
        // follower goes on following: small rings turn faster than a file is written.
        std::thread::scope(|scope| self.watch_in(scope, opts, follower))
    }

    fn watch_in<'s>(
        &mut self,
        scope: &'s std::thread::Scope<'s, '_>,
        opts: &WatchOptions,
        mut follower: Follower<'_>,
    ) -> Result<(), Error>
    where
        Self: 's,
    {
        let dev = self.dev;
        let mut writing: Option<std::thread::ScopedJoinHandle<'s, Written>> = None;
        let clock = dev.version().clock;
        let ticks = |d: Duration| clock.ns_to_ticks(d.as_nanos().min(u64::MAX as u128) as u64);
        let (after, interval) = (ticks(self.policy.after), ticks(self.policy.interval));
        say(format!(
            "# watching {} for {} (snapshots into {})",
            dev.dir().display(),
            self.rules.join("; "),
            self.store.dir().display()
        ))?;
        let poll_interval = Duration::from_millis(opts.interval_ms);
        let mut sleep = poll_interval;
        loop {
            let stopping = STOPPED.load(Relaxed);
            let poll = match stopping {
                true => follower.finish()?,
                false => follower.poll()?,
            };
            let now = dev.now();
            for f in self.matcher.poll(&poll, now) {
                self.counts.matches += 1;
                self.count(Counter::Triggers, 1);
                // The rate: one snapshot per interval; a match sooner is put off to an
                // interval after the last one (which holds its moment if the copy keeps an
                // interval), one older than the last is covered by it.
                let at = match self.last_granted {
                    _ if self.pending.is_some() => None,
                    Some(last) if f.stamp < last => None,
                    Some(last) if f.stamp - last < interval => Some(last + interval),
                    _ => Some(f.stamp),
                };
                match (at, &mut self.pending) {
                    (Some(at), None) => {
                        if at != f.stamp {
                            self.counts.put_off += 1;
                            self.count(Counter::PutOff, 1);
                        }
                        self.last_granted = Some(at);
                        // Its moment is kept in the copy, whatever the follower loses
                        // before the snapshot is due.
                        follower.keep_moment(Some(f.stamp));
                        self.pending = Some(Pending {
                            rule: f.rule,
                            what: f.what,
                            stamp: f.stamp,
                            begin: f.begin,
                            due: at.saturating_add(after),
                            merged: 0,
                        });
                    }
                    (_, pending) => {
                        if let Some(p) = pending {
                            p.merged += 1;
                        }
                        self.counts.merged += 1;
                        self.count(Counter::Merged, 1);
                    }
                }
            }
            // Due, and everything up to its due time read and released (in the copy).
            let now = dev.now();
            let (released, active) = (poll.released_through, poll.active);
            follower.recycle(poll);
            if let Some(p) = self
                .pending
                .take_if(|p| stopping || (now >= p.due && released >= p.due))
            {
                let cut = self.cut(p, &mut follower);
                follower.keep_moment(None);
                if let Some(cut) = cut {
                    // One file at a time: the one before is written first.
                    if let Some(w) = writing.take() {
                        self.finish(w.join().expect("a snapshot's writer"))?;
                    }
                    writing = Some(scope.spawn(move || cut.write(dev)));
                }
            }
            if let Some(w) = writing.take_if(|w| w.is_finished() || stopping) {
                self.finish(w.join().expect("a snapshot's writer"))?;
            }
            self.reap();
            let done = opts.count.is_some_and(|n| self.counts.snapshots >= n);
            if stopping || done {
                if let Some(w) = writing.take() {
                    self.finish(w.join().expect("a snapshot's writer"))?;
                }
                return self.end(&follower);
            }
            // Idle: poll less and less often; at the first event, as often as asked again;
            // never past a pending snapshot's due time.
            sleep = match active {
                true => poll_interval,
                false => {
                    (sleep * 2).clamp(poll_interval, poll_interval.max(Duration::from_millis(100)))
                }
            };
            let until_due = self
                .pending
                .as_ref()
                .map(|p| Duration::from_nanos(clock.ticks_to_ns(p.due.saturating_sub(now))));
            std::thread::sleep(
                until_due
                    .map_or(sleep, |d| d.min(sleep))
                    .max(Duration::from_micros(100)),
            );
        }
    }

    /// Cuts the pending snapshot `p` from the follower's copy (its window), to be written
    /// ([`Cut::write`]) and finished ([`Watcher::finish`]); `None` if it could not be.
    fn cut(&mut self, p: Pending, follower: &mut Follower<'_>) -> Option<Cut> {
        let dev = self.dev;
        let rule = &self.rules[p.rule];
        let reason = format!("{rule}: {}", p.what);
        let mut cause = Cause::new(CauseKind::Rule, &reason);
        cause.pid = std::process::id();
        cause.trigger_stamp = p.stamp;
        cause.interval_stamp = p.begin.unwrap_or(0);
        cause.before_ns = self.policy.before.as_nanos() as u64;
        cause.after_ns = self.policy.after.as_nanos() as u64;
        cause.merged = p.merged;
        // One time for the snapshot: its match's, in its name, its listing and its line.
        let at = crate::store::moment(&dev.version().clock, &cause, 0);
        let cut = self
            .store
            .path_for(at, CauseKind::Rule, &reason, cause.pid)
            .map_err(Error::from)
            .and_then(|path| {
                // A ring the follower lost entries of since the match is saved from its
                // events before the loss, which hold the match.
                // Its window: `before` the match, or from the matched interval's begin if
                // that is older; the file's bytes follow it, not the copy's size.
                let before = dev.version().clock.ns_to_ticks(cause.before_ns);
                let since = p
                    .stamp
                    .saturating_sub(before)
                    .min(p.begin.unwrap_or(u64::MAX));
                // The follower was made keeping a copy ([`run`]): it has one.
                let window = follower
                    .cut_window(p.stamp, since)
                    .ok_or_else(|| std::io::Error::other("its follower kept no copy"))?;
                Ok(Cut {
                    p,
                    at,
                    path,
                    cause,
                    window,
                })
            });
        cut.inspect_err(|e| self.failed(e)).ok()
    }

    /// Counts a snapshot that could not be saved, and says why (one snapshot that could
    /// not be written does not end the watch).
    fn failed(&mut self, e: &Error) {
        self.counts.failed += 1;
        self.count(Counter::Failed, 1);
        eprintln!("ttrace-reader: watch: snapshot not saved: {e}");
    }

    /// After a snapshot's file is written: prints its line, applies the retention, runs
    /// `--exec`.
    fn finish(&mut self, written: Written) -> Result<(), Error> {
        let Written { cut, saved, events } = written;
        if let Err(e) = saved {
            self.failed(&e);
            return Ok(());
        }
        let Cut { p, at, path, .. } = cut;
        let rule = &self.rules[p.rule];
        self.counts.snapshots += 1;
        self.count(Counter::Saved, 1);
        match self
            .store
            .retain(self.policy.max_files, self.policy.max_bytes)
        {
            Ok(removed) => self.count(Counter::Removed, removed),
            Err(e) => eprintln!("ttrace-reader: watch: snapshot retention: {e}"),
        }
        let when = decode::utc(at);
        say(format!(
            "{when} {rule} ({}) -> {}: {} events",
            p.what,
            path.display(),
            events.map_or("?".to_string(), grouped)
        ))?;
        if let Some(endpoint) = &self.otlp {
            // One snapshot whose spans could not be sent does not end the watch.
            if let Err(e) = send(&path, endpoint) {
                eprintln!(
                    "ttrace-reader: watch: {}: spans not sent: {e}",
                    path.display()
                );
            }
        }
        if let Some(cmd) = &self.exec {
            let child = Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .env("TTRACE_SNAPSHOT", &path)
                .env("TTRACE_RULE", rule)
                .spawn();
            match child {
                Ok(c) => self.children.push(c),
                Err(e) => eprintln!("ttrace-reader: watch: --exec {cmd:?}: {e}"),
            }
        }
        Ok(())
    }

    /// Adds `n` to a snapshot counter of the device, where this watcher may change it.
    fn count(&self, counter: Counter, n: u64) {
        if let Some(dev) = &self.counters {
            dev.count_snapshots(counter, n);
        }
    }

    /// Reaps the `--exec` commands that ended.
    fn reap(&mut self) {
        self.children
            .retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_)) | Err(_)));
    }

    /// The footer; waits for the `--exec` commands still running.
    fn end(&mut self, follower: &Follower<'_>) -> Result<(), Error> {
        for mut c in self.children.drain(..) {
            let _ = c.wait();
        }
        let lost: u64 = follower.totals().iter().map(|t| t.counts.lost).sum();
        let c = &self.counts;
        say(format!(
            "# watch: {} matches, {} snapshots, {} merged, {} put off, {} failed, {lost} entries lost by the follower",
            c.matches, c.snapshots, c.merged, c.put_off, c.failed
        ))
    }
}

/// Prints `line` on standard output at once (a closed pipe is no error).
fn say(line: String) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    quiet_pipe(writeln!(out, "{line}").and_then(|_| out.flush()))
}

/// The events the snapshot file at `path` holds (`None` if it cannot be read back).
fn events_in(path: &Path) -> Option<u64> {
    let file = Reader::open_with(path, trust()).ok()?;
    let snap = file.snapshot().ok()?;
    Some(snap.cpus.iter().map(|r| r.events.len() as u64).sum())
}

/// `n` with commas between thousands: `31,902`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Sends the spans of the snapshot file `path` to `endpoint`.
fn send(path: &Path, endpoint: &Endpoint) -> Result<(), Error> {
    let dev = Reader::open(path)?;
    let (view, filter) = super::select::view_window(
        &dev,
        super::select::Select::default(),
        super::select::Window::default(),
    )?;
    let device = dev.dir().display().to_string();
    crate::export::post::send(&view, &filter, &device, endpoint)?;
    Ok(())
}
