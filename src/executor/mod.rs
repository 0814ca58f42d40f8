//! Sending: the one HTTP client, how paths look on the wire, and which forge this is.

pub mod client;
pub mod flavor;
pub mod oauth;
pub mod path;

pub use client::{Forge, Received};
