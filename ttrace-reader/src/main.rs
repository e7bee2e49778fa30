//! `ttrace-reader`: decode, follow and control ttrace devices (see `ttrace-reader --help`).

fn main() -> std::process::ExitCode {
    ttrace_reader::cli::main()
}
