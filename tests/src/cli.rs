//! This package's programs run as a user runs them: the reader's command line
//! ([`reader!`](crate::reader)), the environment-configured writer
//! ([`env_writer!`](crate::env_writer)), the test application ([`test_app!`](crate::test_app))
//! and the cross-process writer ([`test_writer!`](crate::test_writer)). Each gives a [`Cli`],
//! whose last method says what the run must give: [`Cli::ok`], [`Cli::succeeds`],
//! [`Cli::fails`], or [`Cli::run`] for a test that looks at the outcome itself
//! ([`Cli::command`] for one that talks to the process while it runs, [`Cli::start`] for one
//! that reads its output as it comes).
//!
//! The programs' paths are known only to the integration tests (Cargo gives them the
//! `CARGO_BIN_EXE_<name>` variables when it compiles them), hence macros, which expand there.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// The environment variables that configure a device a program creates
/// (`Config::from_env`): a [`Cli`] runs its program without those of the test's own
/// environment, so that a device it creates has the defaults unless the test says otherwise.
pub const CONFIG_VARS: [&str; 4] = [
    "TTRACE_RING_SLOTS",
    "TTRACE_AUX_SIZE",
    "TTRACE_MASK",
    "TTRACE_DISABLED",
];

/// `ttrace-reader` with these arguments (anything a command line takes: `&str`, `&Path`,
/// `String`...), as a [`Cli`]; more with [`Cli::arg`] and [`Cli::args`].
#[macro_export]
macro_rules! reader {
    ($($arg:expr),* $(,)?) => {
        $crate::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-reader-cli"))$(.arg($arg))*
    };
}

/// `ttrace-test-env` (a program configured by the environment alone: it records
/// `env_point(n=7)`, then `x=N` and `info=TEXT` as its arguments say) on the device `dir`
/// (`TTRACE_DIR`), with these arguments, as a [`Cli`].
#[macro_export]
macro_rules! env_writer {
    ($dir:expr $(, $arg:expr)* $(,)?) => {
        $crate::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-env"))
            .env("TTRACE_DIR", $dir)$(.arg($arg))*
    };
}

/// `ttrace-test-app <dir> <rounds>` (three threads recording strings, hex, negative numbers,
/// 12-word events and entry/exit pairs, each line it records printed as `<thread> <text>`),
/// as a [`Cli`].
#[macro_export]
macro_rules! test_app {
    ($dir:expr, $rounds:expr $(,)?) => {
        $crate::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-app"))
            .arg($dir)
            .arg($rounds.to_string())
    };
}

/// `ttrace-test-writer <dir> <events> <tag>` (a process that records `events` events of the
/// shared tracepoint from a thread named `writer-<tag>`, after it printed the path its trace
/// points take; with a fourth argument `wait`, it waits for its standard input to close
/// first), as a [`Cli`].
#[macro_export]
macro_rules! test_writer {
    ($dir:expr, $events:expr, $tag:expr $(,)?) => {
        $crate::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-writer"))
            .arg($dir)
            .arg($events.to_string())
            .arg($tag.to_string())
    };
}

/// `ttrace-test-requests <dir> <mode>` (two threads serving a million requests, or as many
/// as an argument added says, one of 20 ms in the middle; `mode` says what catches it:
/// `trigger`, `panic`, `rules` or `none`), its snapshots going to `snapshots`
/// (`TTRACE_SNAPSHOT_DIR`), as a [`Cli`].
#[macro_export]
macro_rules! requests {
    ($dir:expr, $mode:expr, $snapshots:expr $(,)?) => {
        $crate::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-requests"))
            .env("TTRACE_SNAPSHOT_DIR", $snapshots)
            .arg($dir)
            .arg($mode)
    };
}

/// `ttrace-test-pairs` (a program that records request pairs and events as the lines of
/// its standard input ask, and prints `done <line>` after each: [`Running::send`]) on the
/// device `dir` (`TTRACE_DIR`), as a [`Cli`].
#[macro_export]
macro_rules! pairs_writer {
    ($dir:expr $(,)?) => {
        $crate::cli::Cli::new(env!("CARGO_BIN_EXE_ttrace-test-pairs")).env("TTRACE_DIR", $dir)
    };
}

/// A command line to run (see the [module](self)).
pub struct Cli {
    cmd: Command,
    /// The program's file name and the arguments, for messages.
    line: Vec<String>,
    /// Its standard input (empty if none).
    input: Option<Vec<u8>>,
    /// How long it may run before it is killed and the test fails (a bound on a failure,
    /// not a way to order anything).
    limit: Option<std::time::Duration>,
}

/// What came of a run.
#[derive(Debug)]
pub struct Ran {
    pub pid: u32,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Cli {
    /// The program at `path`, without the [`CONFIG_VARS`] of the test's environment.
    pub fn new(path: &str) -> Cli {
        let mut cmd = Command::new(path);
        for v in CONFIG_VARS {
            cmd.env_remove(v);
        }
        let name = Path::new(path).file_name().unwrap_or(path.as_ref());
        Cli {
            cmd,
            line: vec![name.to_string_lossy().into_owned()],
            input: None,
            limit: None,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cli {
        self.line.push(arg.as_ref().to_string_lossy().into_owned());
        self.cmd.arg(arg);
        self
    }

    pub fn args<S: AsRef<OsStr>>(self, args: impl IntoIterator<Item = S>) -> Cli {
        args.into_iter().fold(self, Cli::arg)
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cli {
        self.cmd.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cli {
        self.cmd.current_dir(dir);
        self
    }

    /// What its standard input holds (else it is empty).
    pub fn input(mut self, bytes: Vec<u8>) -> Cli {
        self.input = Some(bytes);
        self
    }

    /// Kills it, and fails the test, if it still runs after `limit`: for a command that
    /// must end by itself, and that would wait forever if it did not.
    pub fn within(mut self, limit: std::time::Duration) -> Cli {
        self.limit = Some(limit);
        self
    }

    /// The command, for a run with other standard streams: a child read from while it runs,
    /// a pipe for its output.
    pub fn command(self) -> Command {
        self.cmd
    }

    /// Runs it to its end: what came of it, whatever it was.
    pub fn run(mut self) -> Ran {
        let mut child = self
            .cmd
            .stdin(match self.input {
                Some(_) => Stdio::piped(),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{:?}: {e}", self.line));
        let pid = child.id();
        // A descriptor of this very process (not of a later one given its pid), taken while
        // it cannot have been reaped yet.
        // SAFETY: pidfd_open takes a pid and flags, and returns a new descriptor or -1.
        let pidfd = self
            .limit
            .map(|_| unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32);
        let killed = std::sync::atomic::AtomicBool::new(false);
        let out = std::thread::scope(|s| {
            if let (Some(bytes), Some(mut stdin)) = (self.input.take(), child.stdin.take()) {
                s.spawn(move || stdin.write_all(&bytes).expect("standard input"));
            }
            if let (Some(limit), Some(fd)) = (self.limit, pidfd.filter(|&fd| fd >= 0)) {
                let killed = &killed;
                s.spawn(move || {
                    let mut p = libc::pollfd {
                        fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd; the descriptor is readable once the process
                    // has ended.
                    let ready = unsafe { libc::poll(&mut p, 1, limit.as_millis() as i32) };
                    if ready == 0 {
                        killed.store(true, std::sync::atomic::Ordering::SeqCst);
                        // SAFETY: sends SIGKILL to the process the descriptor names.
                        unsafe {
                            libc::syscall(
                                libc::SYS_pidfd_send_signal,
                                fd,
                                libc::SIGKILL,
                                std::ptr::null::<libc::siginfo_t>(),
                                0,
                            )
                        };
                    }
                });
            }
            child.wait_with_output().unwrap()
        });
        if let Some(fd) = pidfd.filter(|&fd| fd >= 0) {
            // SAFETY: the descriptor is ours, and used no more.
            unsafe { libc::close(fd) };
        }
        let text = |b: Vec<u8>, what: &str| {
            String::from_utf8(b)
                .unwrap_or_else(|e| panic!("{:?}: {what} not UTF-8: {e}", self.line))
        };
        let ran = Ran {
            pid,
            status: out.status,
            stdout: text(out.stdout, "standard output"),
            stderr: text(out.stderr, "standard error"),
        };
        assert!(
            !killed.load(std::sync::atomic::Ordering::SeqCst),
            "{:?}: still running after {:?} (killed); it printed {:?} and {:?}",
            self.line,
            self.limit.unwrap_or_default(),
            ran.stdout,
            ran.stderr
        );
        ran
    }

    /// Runs it; it must succeed: all of the run.
    pub fn succeeds(self) -> Ran {
        let line = self.line.clone();
        let ran = self.run();
        assert!(
            ran.status.success(),
            "{line:?}: {}: {}",
            ran.status,
            ran.stderr
        );
        ran
    }

    /// Runs it; it must succeed: its standard output.
    pub fn ok(self) -> String {
        self.succeeds().stdout
    }

    /// Runs it; it must fail with exit status 1 and say why in one line on standard error,
    /// not a panic: that line.
    pub fn fails(self) -> String {
        let line = self.line.clone();
        let ran = self.run();
        let err = ran.stderr;
        assert_eq!(
            ran.status.code(),
            Some(1),
            "{line:?}: not a clean failure: {err}"
        );
        assert!(!err.contains("panicked"), "{line:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{line:?}: {err:?}");
        err
    }
}

impl Cli {
    /// Starts it, its standard output read line by line as it comes ([`Running`]).
    pub fn start(self) -> Running {
        self.start_piped(false)
    }

    /// [`Cli::start`], its standard input a pipe the test writes to ([`Running::send`]).
    pub fn start_talking(self) -> Running {
        self.start_piped(true)
    }

    fn start_piped(self, talking: bool) -> Running {
        let line = self.line.clone();
        let mut cmd = self.command();
        if talking {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let out = std::io::BufReader::new(child.stdout.take().expect("its output"));
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
        }
    }
}

/// A program left running ([`Cli::start`]), and the lines of its output read so far; killed
/// when dropped, if it still runs.
pub struct Running {
    /// The process.
    pub child: Child,
    lines: Receiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
    /// Its standard input, if the test writes to it ([`Cli::start_talking`]).
    pub stdin: Option<std::process::ChildStdin>,
}

impl Running {
    /// Its next line, or `None` at the end of its output; fails the test, naming `what` was
    /// awaited, if none comes within `patience` (a bound on a failure, not a way to order
    /// anything).
    pub fn next(&mut self, what: &str, patience: Duration) -> Option<String> {
        match self.lines.recv_timeout(patience) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                panic!("no {what} after {patience:?}; it printed {:#?}", self.seen)
            }
        }
    }

    /// Writes `line` to its standard input, then waits for it to print `done <line>` (as
    /// `ttrace-test-pairs` does once it recorded what the line asks).
    pub fn send(&mut self, line: &str, patience: Duration) {
        let stdin = self.stdin.as_mut().expect("started with start_talking");
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .expect("its input");
        let done = format!("done {line}");
        self.until(&done, patience, |l| l == done);
    }

    /// Reads lines until one satisfies `want`, and returns it ([`Running::next`]).
    pub fn until(&mut self, what: &str, patience: Duration, want: impl Fn(&str) -> bool) -> String {
        loop {
            match self.next(what, patience) {
                Some(line) if want(&line) => return line,
                Some(_) => {}
                None => panic!("it ended before {what}; it printed {:#?}", self.seen),
            }
        }
    }
}

impl Running {
    /// Runs `program`, started held (`TTRACE_TEST_HOLD=1`: it prints `ready` once its
    /// tracepoints are registered, then waits for a byte on its standard input), once the
    /// `watch` running as `watcher` follows the device (its `# watching` line): what the
    /// watcher sees begins where it starts following, so the program's events must come
    /// after. Waits for the program to end, successfully; returns what it printed.
    pub fn run_watched(program: Cli, watcher: &mut Running, patience: Duration) -> Vec<String> {
        let mut program = program.env("TTRACE_TEST_HOLD", "1").start_talking();
        program.until("its ready line", patience, |l| l == "ready");
        watcher.until("the watching line", patience, |l| {
            l.starts_with("# watching ")
        });
        let stdin = program.stdin.as_mut().expect("started talking");
        stdin.write_all(b"!").expect("its input");
        while program.next("its output", patience).is_some() {}
        let status = program.child.wait().expect("its status");
        assert!(status.success(), "{status}: {:#?}", program.seen);
        std::mem::take(&mut program.seen)
    }

    /// Ends this `watch` as Ctrl-C would (it saves what is pending, then prints its
    /// footer), and returns the snapshot files its lines announced (`... -> FILE: N events`).
    pub fn stop_watch(mut self, patience: Duration) -> Vec<std::path::PathBuf> {
        // SAFETY: our own child, not yet reaped (`Running` waits for it only when dropped).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut files = Vec::new();
        while let Some(line) = self.next("a line", patience) {
            if let Some((_, after)) = line.split_once(" -> ") {
                let (file, _) = after.rsplit_once(": ").expect("FILE: N events");
                files.push(file.into());
            }
            if line.starts_with("# watch:") {
                break;
            }
        }
        files
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
