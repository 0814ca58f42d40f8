//! Arguments: from the JSON a client sent to a `CallPlan` the executor can send.
//!
//! Raw and resolved are different types: `fields` spells body field names as the spec does,
//! `validate` checks the JSON arguments against the tool's schema, and only then can `plan`
//! build a `CallPlan` (encoded path, query pairs, body or multipart parts). Nothing in a
//! `CallPlan` needs checking again.

pub mod fields;
pub mod plan;
pub mod raw;
pub mod sudo;
pub mod upload;
pub mod validate;

pub use plan::{CallPlan, PageRequest, PlanBody, Root};
