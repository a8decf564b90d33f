//! The build as a pipeline: cut by the memory budget, reusing what a history span finds again,
//! embedded, written and published; its stages for a workflow's jobs; delta and gc.

pub(crate) mod budget;
pub(crate) mod build;
pub(crate) mod lifecycle;
pub(crate) mod spans;
pub(crate) mod stages;
