//! `ttrace-reader snapshot`: a consistent copy of the device in one file.

use super::open::open;
use crate::output::{output_target, write_output, Shape, Target};
use crate::Error;
use std::path::PathBuf;

/// Saves `device` to the file `output` (replaced with `force`), and says what it holds.
pub(super) fn run(device: Option<PathBuf>, output: PathBuf, force: bool) -> Result<(), Error> {
    let dev = open(device)?;
    let target = output_target(&output, Shape::File, force)?;
    if target == Target::Stream {
        return Err(Error::SnapshotToStream(output));
    }
    let saved = write_output(&output, target, Shape::File, |tmp| Ok(dev.save(tmp)?))?;
    println!(
        "{}: {} entries, {} being written, {} overwritten while copied; {} bytes (of a {}-byte device)",
        output.display(),
        saved.entries,
        saved.claimed,
        saved.changed,
        saved.bytes,
        saved.image_bytes
    );
    if let Some(e) = saved.aux_error {
        println!("# aux buffer not saved: {e}");
    }
    Ok(())
}
