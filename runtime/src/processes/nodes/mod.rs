//! Runs across nodes: one launcher per node, joined to node 0's launcher by TCP.
//!
//! Each node's launcher is an ordinary launcher of GPU PEs (the shared heap of its machine, the
//! launch gate, the PE records) for the PEs of its node: node `r` of `n` runs PEs
//! `r * k .. (r + 1) * k` of the run's `n * k`. What crosses nodes goes over one TCP connection
//! from each follower (node 1 and up) to node 0's launcher, the *coordinator*
//! (docs/design.md 5.9):
//!
//! 1. the follower says hello with the run's fingerprint (registry, settings, topology, tasks),
//!    and node 0 refuses another run;
//! 2. node 0 forwards NVSHMEM's unique ID, which PE 0 made, and every follower writes it into its
//!    heap, where its PEs wait for it (NVSHMEM's unique-ID bootstrap, across nodes);
//! 3. each follower says when its PEs are at its gate; node 0 opens every gate once all are;
//! 4. during the run, followers send their workers' progress records, task tags, queue words
//!    and idle counters, which node 0 writes into its heap: its watchdog and hang report see
//!    every worker of the run; node 0 sends an abort to every node;
//! 5. at the end, followers send their PEs' times and statistics and the changes their PEs made
//!    to the writable data areas; node 0 adds them up, and sends the run's results to every
//!    follower, so that every node's caller gets the same report and areas.
//!
//! A failure on any node is sent to the other side and ends the run there too.

mod link;
pub(crate) mod state;
pub(crate) mod wire;

pub(crate) use state::{NodeLink, NodeStart};

use std::ops::Range;

use crate::error::{Error, Result};

/// The environment variables a node's rank is read from when `--node-rank` is not given, in
/// order: mgws's own, Open MPI's `mpirun`, PMIx, PMI, Slurm's `srun`.
pub const RANK_VARS: [&str; 5] = [
    "MGWS_NODE_RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
];

/// The environment variable the coordinator's address is read from when `--coordinator` is not
/// given.
pub const COORDINATOR_VAR: &str = "MGWS_COORDINATOR";

/// The nodes of a run over GPU PEs: how many, which one this launcher is, and where node 0's
/// launcher listens. Victims are ordered by PE, then node, under
/// [`VictimPolicy::SameDeviceBias`](crate::scheduler::VictimPolicy::SameDeviceBias) (the CLI's
/// default across nodes is 0.9); under a uniform policy they stay uniform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Nodes of the run, each with the same number of PEs.
    pub count: u32,
    /// This launcher's node, `0..count`; node 0 coordinates.
    pub rank: u32,
    /// `host:port` where node 0's launcher listens (it binds it; the others connect to it).
    pub coordinator: String,
}

impl Nodes {
    /// Checked settings: at least one node, the rank below the count, an address.
    pub fn new(count: u32, rank: u32, coordinator: impl Into<String>) -> Result<Nodes> {
        let coordinator = coordinator.into();
        if count == 0 {
            return Err(Error::Config("--nodes must be at least 1".into()));
        }
        if rank >= count {
            return Err(Error::Config(format!(
                "node rank {rank} is not below --nodes {count}"
            )));
        }
        if count > 1 && coordinator.trim().is_empty() {
            return Err(Error::Config(format!(
                "a run over {count} nodes needs the coordinator's address: --coordinator \
                 HOST:PORT (or {COORDINATOR_VAR}), an address of node 0's machine"
            )));
        }
        Ok(Nodes {
            count,
            rank,
            coordinator,
        })
    }

    /// The node rank a launcher such as `mpirun` or `srun` gave this process (the first of
    /// [`RANK_VARS`] that is set), with the variable's name.
    pub fn rank_from_env() -> Result<Option<(&'static str, u32)>> {
        for var in RANK_VARS {
            if let Some(v) = std::env::var_os(var) {
                let text = v.to_string_lossy();
                let rank = text.trim().parse().map_err(|_| {
                    Error::Config(format!("{var}={text} is no node rank (a whole number)"))
                })?;
                return Ok(Some((var, rank)));
            }
        }
        Ok(None)
    }

    /// The PEs of this node among `processes`, which the nodes share evenly.
    pub fn local_pes(&self, processes: u32) -> Result<Range<u32>> {
        if processes == 0 || !processes.is_multiple_of(self.count) {
            return Err(Error::Config(format!(
                "{processes} PEs cannot be shared evenly by {} nodes: --processes counts the PEs \
                 of every node together, the same number on each",
                self.count
            )));
        }
        let k = processes / self.count;
        Ok(self.rank * k..(self.rank + 1) * k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_share_the_pes_evenly_and_check_their_settings() {
        let n = Nodes::new(3, 1, "node0:7000").unwrap();
        assert_eq!(n.local_pes(6).unwrap(), 2..4);
        assert!(n.local_pes(4).unwrap_err().to_string().contains("evenly"));
        assert!(Nodes::new(0, 0, "a:1").is_err());
        assert!(Nodes::new(2, 2, "a:1")
            .unwrap_err()
            .to_string()
            .contains("rank 2"));
        assert!(Nodes::new(2, 1, " ")
            .unwrap_err()
            .to_string()
            .contains("--coordinator"));
        assert_eq!(Nodes::new(1, 0, "").unwrap().local_pes(2).unwrap(), 0..2);
    }
}
