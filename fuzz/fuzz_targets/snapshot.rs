#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ttrace_tests::fuzz::snapshot(data);
});
