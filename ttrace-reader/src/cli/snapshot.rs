//! `ttrace-reader snapshot`: a consistent copy of the device in one file, or on a pipe or
//! device (`-o -`, `-o /dev/stdout`).

use super::open::open;
use crate::output::{output_target, write_output, Shape, Target};
use crate::Error;
use devttrace::image::Saved;
use devttrace::Reader;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Saves `device` to `output` (replaced with `force`; `-` is standard output), and says
/// what it holds: on standard output, or on standard error when the snapshot goes to a pipe
/// or device.
pub(super) fn run(device: Option<PathBuf>, output: PathBuf, force: bool) -> Result<(), Error> {
    let dev = open(device)?;
    let target = match output == Path::new("-") {
        true => Target::Stream,
        false => output_target(&output, Shape::File, force)?,
    };
    let saved = match target {
        Target::Stream => match stream(&dev, &output)? {
            Some(saved) => saved,
            // The reader closed the pipe (`| head -c 100`): a quiet end.
            None => return Ok(()),
        },
        target => write_output(&output, target, Shape::File, |tmp| Ok(dev.save(tmp)?))?,
    };
    let mut said = format!(
        "{}: {} entries, {} being written, {} overwritten while copied; {} bytes (of a {}-byte device)",
        output.display(),
        saved.counts.committed,
        saved.counts.claimed,
        saved.counts.changed,
        saved.bytes,
        saved.image_bytes
    );
    if let Some(e) = saved.aux_error {
        said += &format!("\n# aux buffer not saved: {e}");
    }
    match target {
        Target::Stream => eprintln!("{said}"),
        _ => println!("{said}"),
    }
    Ok(())
}

/// Writes a snapshot of `dev` to the pipe or device `output` (`-`: standard output): saved
/// to a temporary file first (a snapshot is written in place, then checked), then copied.
/// `None` when the reader closed the pipe.
fn stream(dev: &Reader, output: &Path) -> Result<Option<Saved>, Error> {
    let named = |source: std::io::Error| Error::File {
        path: output.to_path_buf(),
        source,
    };
    // Opened (and a terminal refused) before anything is saved.
    let mut out: Box<dyn std::io::Write> = match output == Path::new("-") {
        true => {
            let stdout = std::io::stdout();
            if stdout.is_terminal() {
                return Err(Error::SnapshotToTerminal(output.to_path_buf()));
            }
            Box::new(stdout.lock())
        }
        false => {
            let file = std::fs::OpenOptions::new()
                .append(true)
                .open(output)
                .map_err(named)?;
            if file.is_terminal() {
                return Err(Error::SnapshotToTerminal(output.to_path_buf()));
            }
            Box::new(file)
        }
    };
    let tmp = tempfile::Builder::new()
        .prefix("ttrace-snapshot-")
        .tempdir()?;
    let file = tmp.path().join("snapshot.ttrace");
    let saved = dev.save(&file)?;
    let copied = std::fs::File::open(&file)
        .and_then(|mut from| std::io::copy(&mut from, &mut out))
        .and_then(|_| out.flush());
    match copied {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(None),
        Err(e) => Err(named(e)),
        Ok(()) => Ok(Some(saved)),
    }
}
