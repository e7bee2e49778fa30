//! `ttrace-reader ctl`: show the control state, or change what is recorded (creating the
//! device when there is none yet); a mistyped command is named, with the nearest one.

use super::open::{changeable, open, refusal, trust};
use crate::output::quiet_pipe;
use crate::rules::Rule;
use crate::Error;
use devttrace::control::Command;
use devttrace::Device;
use std::io::Write;
use std::path::PathBuf;

/// The commands `ctl` takes.
const CTL_COMMANDS: [&str; 9] = [
    "level", "setmask", "setbits", "clrbits", "enable", "disable", "on", "off", "reset",
];

/// Whether `word` reads as a (mistyped) command rather than a path: a bare word of letters.
fn looks_like_command(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphabetic())
}

/// The error for a word that is not a ctl command.
fn not_a_command(word: &str) -> Error {
    let guess = CTL_COMMANDS
        .iter()
        .map(|&c| {
            (
                crate::rules::edit_distance(&word.to_ascii_lowercase(), c),
                c,
            )
        })
        .min()
        .filter(|(d, _)| *d <= 2)
        .map(|(_, c)| c);
    Error::NotACommand {
        word: word.to_string(),
        guess,
        commands: &CTL_COMMANDS,
    }
}

/// Runs `ctl [DEVICE] [COMMAND ARGS...]`.
pub(super) fn run(mut words: Vec<String>) -> Result<(), Error> {
    let device = match words.first() {
        Some(w) if !CTL_COMMANDS.contains(&w.as_str()) => {
            // A word that is no path here and reads as a command is a mistyped command.
            if looks_like_command(w) && std::fs::symlink_metadata(w).is_err() {
                return Err(not_a_command(w));
            }
            Some(PathBuf::from(words.remove(0)))
        }
        _ => None,
    };
    if let Some(w) = words
        .first()
        .filter(|w| !CTL_COMMANDS.contains(&w.as_str()))
    {
        return Err(not_a_command(w));
    }
    if words.is_empty() {
        let dev = open(device)?;
        return quiet_pipe(std::io::stdout().lock().write_all(dev.ctl().as_bytes()));
    }
    let line = words.join(" ");
    // Checked before anything is opened or created: a bad command changes nothing.
    let command: Command = line.parse().map_err(Error::BadCommand)?;
    // A snapshot rule is checked as `watch --on` checks it, and kept in its canonical words
    // (so that `off` finds it however it was spaced).
    let rule = match &command {
        Command::On(r) => Some(r.parse::<Rule>()?),
        Command::Off(r) if r != "all" => r.parse::<Rule>().ok(),
        _ => None,
    };
    let command = match (command, &rule) {
        (Command::On(_), Some(r)) => Command::On(r.to_string()),
        (Command::Off(_), Some(r)) => Command::Off(r.to_string()),
        (command, _) => command,
    };
    let dir = device.unwrap_or_else(devttrace::default_dir);
    changeable(&dir, Error::SnapshotNotControlled)?;
    let dev = match Device::attach_with(&dir, trust()) {
        // No device yet: create it as the first program would, so that the setting is
        // there before any program runs.
        Err(devttrace::Error::Missing(_)) if std::fs::symlink_metadata(&dir).is_err() => {
            let config = devttrace::Config {
                dir: Some(dir.clone()),
                ..devttrace::Config::from_env()?
            };
            let dev = Device::open(&config)?;
            let v = dev.reader().version();
            eprintln!(
                "ttrace-reader: ctl: no device at {}: created it ({} cpus x {} slots, aux {} KiB, as a program would) for `{line}` to apply to the programs that use it",
                dir.display(),
                v.num_cpus,
                v.ring_slots,
                v.aux_size >> 10
            );
            dev
        }
        opened => opened.map_err(refusal)?,
    };
    let recording = rules_recording(&dev);
    dev.apply(&command)?;
    // A change that turns off what an installed rule reads says so: the rule then
    // matches nothing, and nothing else would tell.
    for (rule, before) in recording {
        let meta = dev.reader().metadata();
        let off: Vec<&str> = before
            .iter()
            .filter(|&&id| !dev.reader().enabled(id))
            .filter_map(|&id| meta.tracepoints.get(id as usize).map(|t| t.name.as_str()))
            .collect();
        if let Some(first) = off.first() {
            let mut names: Vec<&str> = off.clone();
            names.dedup();
            eprintln!(
                "ttrace-reader: ctl: note: `{line}` turns off {}, which the installed rule                  `{rule}` reads: it matches nothing until {first} records again",
                names.join(", ")
            );
        }
    }
    match &command {
        Command::Enable(p) | Command::Disable(p) if !dev.pattern_matches_known(p) => eprintln!(
            "ttrace-reader: ctl: note: `{p}` matches nothing yet (no tracepoint of this device, nor `info`); the rule is kept for tracepoints registered later"
        ),
        Command::On(_) => {
            if let Some(Err(e)) = rule.map(|r| r.check(&dev.reader().metadata())) {
                eprintln!(
                    "ttrace-reader: ctl: note: {}: {e}; the rule is kept for tracepoints registered later",
                    dir.display()
                );
            }
            if !dev.reader().rules_applied() {
                eprintln!(
                    "ttrace-reader: ctl: note: no process applies the snapshot rules of {} now: \
                     a program applies them once it calls ttrace_snapshots::apply_snapshot_rules() \
                     (or run `ttrace-reader watch --on RULE` to apply one from outside)",
                    dir.display()
                );
            }
        }
        _ => {}
    }
    quiet_pipe(
        std::io::stdout()
            .lock()
            .write_all(dev.reader().ctl().as_bytes()),
    )
}

/// Each installed snapshot rule of `dev`, with the tracepoints it reads that record now.
fn rules_recording(dev: &Device) -> Vec<(String, Vec<u16>)> {
    let reader = dev.reader();
    let meta = reader.metadata();
    reader
        .snapshot_rules()
        .into_iter()
        .filter_map(|text| {
            let rule = text.parse::<Rule>().ok()?;
            let on = rule
                .tracepoints(&meta)
                .into_iter()
                .filter(|&id| reader.enabled(id))
                .collect();
            Some((text, on))
        })
        .collect()
}
