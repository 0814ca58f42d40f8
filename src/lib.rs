pub mod catalog;
pub mod config;
pub mod error;
