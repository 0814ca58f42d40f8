//! The server's integration tests, one binary: each module is one area (the command line,
//! the stdio pipeline, HTTP identities, protocols, real forges, ...), all sharing `support`
//! (the fake forge harness, the HTTP client, the Python drivers) compiled once.
//!
//! `cargo test --test integration MODULE::` runs one area; the end-to-end tests against a
//! real forge are `e2e_real_forge::`, and against two at once (one server, a profiles file)
//! `e2e_two_forges::`, ignored unless asked for (`-- --ignored`).

#[macro_use]
mod support;

mod author_trust;
mod cli;
mod cli_profiles;
mod confirm;
mod conformance;
mod e2e_real_forge;
mod e2e_two_forges;
mod every_operation;
mod flow;
mod guard;
mod http_app;
mod http_identity;
mod http_narrowing;
mod http_protocols;
mod packaging;
mod path_encoding;
mod policy;
mod profiles;
mod python_sdk_http;
mod python_sdk_stdio;
mod reliability;
mod resources;
mod shutdown;
mod snapshots;
mod stdio_pipeline;
