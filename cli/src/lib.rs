//! # mgws-cli
//!
//! The `mgws` command line around the [`mgws`] library: the built-in workloads' drivers with their
//! verification, the baselines measured in the same process (rayon, sequential), the corpus
//! readers of CONTAINS and `mgws bench`.

pub mod args;
pub mod baseline;
pub mod bench;
pub mod cli;
pub mod corpus;
pub mod output;
pub mod translate;
pub mod workload;
