//! One module per page.

pub mod dead;
pub mod errors;
pub mod job;
pub mod jobs;
pub mod keys;
pub mod queues;
pub mod workers;
pub mod workflows;
