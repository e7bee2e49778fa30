//! `ttrace-reader export`: the trace in another tool's format (uftrace, CTF, Chrome JSON,
//! Perfetto),
//! written as the output policy says, with a progress bar on a terminal.

use super::open::open;
use super::select::{view_window, Select, Window};
use crate::export::otlp;
use crate::export::post::Endpoint;
use crate::merge::Merge;
use crate::output::{output_target, write_output, Shape, Target};
use crate::Error;
use devttrace::Reader;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Formats of `export`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(super) enum ExportFormat {
    /// A uftrace data directory.
    Uftrace,
    /// Chrome Trace Event JSON.
    Chrome,
    /// Perfetto's native protobuf trace (TrackEvent), for ui.perfetto.dev and
    /// trace_processor.
    Perfetto,
    /// OpenTelemetry spans, JSON lines (`TracesData` a line, as the collector's file
    /// exporter writes).
    Otlp,
    /// OpenTelemetry spans, one protobuf `TracesData`.
    OtlpProto,
    /// Common Trace Format 1.8.
    Ctf,
}

/// A progress bar on a terminal, counting events; hidden when standard error is not one.
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {human_pos}/{human_len} events, {per_sec}, {eta} left",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Exports `device` in `format` to `output` (replaced with `force`).
pub(super) fn run(
    format: ExportFormat,
    device: Option<PathBuf>,
    output: &Path,
    force: bool,
    counters: &[String],
    select: Select,
    window: Window,
) -> Result<(), Error> {
    if !counters.is_empty() && !matches!(format, ExportFormat::Perfetto) {
        return Err(Error::CounterNeedsPerfetto);
    }
    let dev = open(device)?;
    let shape = match format {
        ExportFormat::Chrome
        | ExportFormat::Perfetto
        | ExportFormat::Otlp
        | ExportFormat::OtlpProto => Shape::File,
        ExportFormat::Ctf => Shape::Dir("metadata"),
        ExportFormat::Uftrace => Shape::Dir("info"),
    };
    let target = match output == Path::new("-") {
        true => Target::Stream,
        false => output_target(output, shape, force)?,
    };
    let (view, filter) = view_window(&dev, select, window)?;
    let device = view_name(&dev);
    let counters = crate::export::perfetto::counters(&view.meta, counters)?;
    let total = view.cpus.iter().map(|r| r.events.len() as u64).sum();
    let bar = progress_bar(total);
    let progress = |n: u64| bar.set_position(n);
    let items = Merge::view(&view, &filter);
    let ctx = (&view).into();
    let named = |r: std::io::Result<crate::export::Written>| {
        r.map(Some).map_err(|source| Error::File {
            path: output.to_path_buf(),
            source,
        })
    };
    // A format written as one stream, to a file or a pipe.
    let stream = |out: &mut dyn Write, items| -> std::io::Result<crate::export::Written> {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
        let written = match format {
            ExportFormat::Perfetto => crate::export::perfetto::write(
                ctx, &view.cpus, items, &counters, &mut out, progress,
            )?,
            ExportFormat::Otlp | ExportFormat::OtlpProto => {
                let encoding = match format {
                    ExportFormat::Otlp => otlp::Encoding::Json,
                    _ => otlp::Encoding::Proto,
                };
                let mut batch = |b: &[u8]| out.write_all(b);
                otlp::write(ctx, &view.cpus, items, encoding, &device, &mut batch)?
            }
            _ => crate::export::chrome::write(ctx, &view.cpus, items, &mut out, progress)?,
        };
        out.flush().map(|()| written)
    };
    let done = match (format, target) {
        (
            ExportFormat::Chrome
            | ExportFormat::Perfetto
            | ExportFormat::Otlp
            | ExportFormat::OtlpProto,
            Target::Stream,
        ) => {
            // `-o /dev/stdout | head` ends as quietly as `-o - | head`.
            let written = match output == Path::new("-") {
                true => stream(&mut std::io::stdout().lock(), items),
                false => std::fs::OpenOptions::new()
                    .append(true)
                    .open(output)
                    .and_then(|mut file| stream(&mut file, items)),
            };
            match written {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(None),
                written => named(written),
            }
        }
        (
            ExportFormat::Chrome
            | ExportFormat::Perfetto
            | ExportFormat::Otlp
            | ExportFormat::OtlpProto,
            target,
        ) => write_output(output, target, shape, |tmp| {
            named(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(tmp)
                    .and_then(|mut file| stream(&mut file, items)),
            )
        }),
        (ExportFormat::Ctf, target) => write_output(output, target, shape, |tmp| {
            named(crate::export::ctf::write(
                ctx, &view.cpus, items, tmp, progress,
            ))
        }),
        (ExportFormat::Uftrace, target) => write_output(output, target, shape, |tmp| {
            named(crate::export::uftrace::write(
                ctx, &view.cpus, items, tmp, progress,
            ))
        }),
    };
    bar.finish_and_clear();
    let written = done?;
    dev.check_intact()?;
    // What was exported, counted as `dump` counts it, on a terminal (as the progress bar).
    if let (Some(written), true) = (
        written,
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
    ) {
        eprintln!("{}: {}", output.display(), written.tally().line());
    }
    Ok(())
}

/// What the resource attribute `ttrace.device` says of `dev`: its path.
fn view_name(dev: &Reader) -> String {
    dev.dir().display().to_string()
}

/// Sends the spans of `device` (as `--format otlp` has them) to the OTLP/HTTP receiver at
/// `url`, a request per batch.
pub(super) fn post(
    device: Option<PathBuf>,
    url: &str,
    select: Select,
    window: Window,
) -> Result<(), Error> {
    let endpoint = Endpoint::parse(url)?;
    let dev = open(device)?;
    let (view, filter) = view_window(&dev, select, window)?;
    let written = crate::export::post::send(&view, &filter, &view_name(&dev), &endpoint)?;
    dev.check_intact()?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("{endpoint}: {} spans sent", written.pairs);
    }
    Ok(())
}
