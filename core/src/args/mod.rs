//! Arguments: from the JSON a client sent to a `CallPlan` the executor can send.
//!
//! Raw and resolved are different types: `Prepared` is a call's arguments once `fields` has
//! spelled body field names as the spec does and `validate` has checked them against the
//! tool's schema; the policy judges it, and only from it is a `CallPlan` built (encoded path,
//! query pairs, body or multipart parts). Nothing in either needs checking again.

pub mod fields;
pub mod plan;
pub(crate) mod prepared;
pub mod raw;
pub mod sudo;
pub(crate) mod upload;
pub mod validate;

pub use plan::{CallPlan, PageRequest, PlanBody, Root};
pub use prepared::Prepared;
