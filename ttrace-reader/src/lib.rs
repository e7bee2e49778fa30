//! ttrace-reader: decode a ttrace device to text.
//!
//! ```no_run
//! let dev = ttrace_core::Device::attach(std::path::Path::new("/dev/shm/ttrace-1000"))?;
//! let trace = ttrace_reader::text::Trace::capture(&dev);
//! trace.write_lines(&mut std::io::stdout())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod demo;
pub mod follow;
pub mod format;
pub mod text;
