//! Temporary space a build owns: scratch directories claimed by a lock (so a killed build's
//! are removed by the next) and records spilled to unnamed temporary files.

pub(crate) mod scratch;
pub(crate) mod spill;
