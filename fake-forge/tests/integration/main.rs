//! The fake forge's own tests, one binary: its routes against both specs, its model of a
//! forge, OAuth, scripted answers and the binary, sharing `common` (a raw HTTP client).

mod common;

mod binary;
mod collaborators;
mod model;
mod oauth;
mod routing;
mod scripts;
