//! libFuzzer's bytes to `aegis_fuzzing::arguments` (`fuzz-bodies/`), where the target and its
//! properties are written (and replayed over the corpus by that crate's tests).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aegis_fuzzing::arguments(data));
