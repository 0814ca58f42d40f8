//! What came back: the body as data (JSON, text or binary), the status as an error kind,
//! and pagination from the headers. Pure functions over what the executor received.

pub mod body;
pub mod json;
pub mod pagination;
pub mod status;
