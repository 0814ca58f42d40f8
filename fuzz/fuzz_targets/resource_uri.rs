//! libFuzzer's bytes to `aegis_gitea_mcp::fuzzing::resource_uri`, where the target and its
//! properties are written (and replayed over the corpus by the library's tests).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aegis_gitea_mcp::fuzzing::resource_uri(data));
