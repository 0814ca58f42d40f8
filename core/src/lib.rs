//! The pipeline of one tool call, as pure stages: each takes the values it needs and returns
//! values, and none knows the running server (no async runtime, no HTTP or MCP library, no
//! settings). The server crate composes them around its identity, forge client and transports.
//!
//! In the order a call meets them: `admission` (which call it is and whether it may run:
//! the arguments prepared once and judged by the policy), `catalog` (the spec's operations as
//! tools), `args` (the arguments normalised, validated and planned as a request), `policy`
//! (what is listed and allowed, and which repositories), `path` (how a path is encoded), `decode` (the forge's
//! answer as data), `shape` (the data the agent asked for), `guard` (secrets, hidden
//! characters and bounds: the only way to a `Guarded` result), `envelope` (the result's wire
//! form); `discovery` answers the search and schema tools; `error` is every way a call
//! fails, and `identity` what the envelope says of who called.

pub mod admission;
pub mod args;
pub mod catalog;
pub mod decode;
pub mod discovery;
pub mod envelope;
pub mod error;
pub mod guard;
pub mod identity;
pub mod path;
pub mod policy;
pub mod shape;
