//! MCP transports. stdio for one person; the HTTP transports come with per-request
//! identities.

pub mod stdio;
