//! Sending: the one HTTP client, and which forge this is.

pub(crate) mod client;
pub(crate) mod flavor;
pub(crate) mod oauth;

pub(crate) use client::{Forge, Received};
