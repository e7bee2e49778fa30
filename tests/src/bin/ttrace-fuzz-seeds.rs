//! Writes the fuzz targets' seed inputs (`ttrace_tests::fuzz::seeds`) into a corpus
//! directory: `cargo run -p ttrace-tests --bin ttrace-fuzz-seeds -- fuzz/corpus`.

fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("fuzz/corpus".into()));
    for (i, (target, bytes)) in ttrace_tests::fuzz::seeds().into_iter().enumerate() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        std::fs::write(dir.join(format!("seed-{i}")), bytes).expect("seed");
    }
}
