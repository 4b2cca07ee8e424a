// Automatically generated mod.rs
pub mod message;
