//! The `ttrace-reader` command line, run as a user runs it (this package builds it as the
//! `ttrace-reader-cli` binary), on devices written by this process and by others: `dump`,
//! `follow`, `ctl`, `stats`, `demo`, `clear`, `decode`, `report`, `mount`, what a new user
//! trips on, and what each says when it cannot do what it is asked.
//!
//! The `mount` tests need FUSE: they are `#[ignore = "needs FUSE: ..."]`, run with
//! `-- --include-ignored`.

mod clear;
mod decode;
mod fatal;
mod first_use;
mod follow_wait;
mod info;
mod messages;
mod mount;
mod not_regular;
mod pre_release;
mod reader_cli;
mod snapshots;
mod spans;
mod report;
mod watch;
