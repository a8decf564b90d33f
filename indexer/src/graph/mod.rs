//! The commit graph as a build holds it: the compact history of every commit, and the
//! cross-references (edges) made from it.

pub(crate) mod edges;
pub(crate) mod history;
