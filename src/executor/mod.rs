//! Sending: the one HTTP client, and which forge this is.

pub mod client;
pub mod flavor;
pub mod oauth;

pub use client::{Forge, Received};
