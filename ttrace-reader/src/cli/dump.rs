//! `ttrace-reader dump`: the whole trace as text.

use super::open::open;
use super::select::{time_format, view_window, Select, Window};
use crate::decode::{self, TimeFormat};
use crate::merge::Filter;
use crate::output::quiet_pipe;
use crate::Error;
use devttrace::View;
use std::io::Write;
use std::path::PathBuf;

/// Writes a dump to standard output (a snapshot's footer says why it was taken).
pub(super) fn print(view: &View<'_>, filter: &Filter, time: TimeFormat) -> std::io::Result<()> {
    print_with(view, filter, time, false)
}

/// [`print`], each line with its span path if `spans` (`--spans`).
fn print_with(
    view: &View<'_>,
    filter: &Filter,
    time: TimeFormat,
    spans: bool,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    decode::dump_with(view, filter, time, None, spans, &mut out)?;
    let held = crate::cause::Held::of_view(view);
    crate::cause::footer(view.reader(), Some(held), &mut out)?;
    out.flush()
}

/// Prints the dump of `device`: what `select` and `window` choose, at `--utc` times or not,
/// each event with its span path if `spans`.
pub(super) fn run(
    device: Option<PathBuf>,
    select: Select,
    window: Window,
    utc: bool,
    spans: bool,
) -> Result<(), Error> {
    let dev = open(device)?;
    let (view, filter) = view_window(&dev, select, window)?;
    quiet_pipe(print_with(&view, &filter, time_format(utc), spans))?;
    // Events are copied as they are printed: a file cut meanwhile made some read as empty.
    Ok(dev.check_intact()?)
}
