//! Data descriptors: where a task's out-of-struct data lives, how large it is and how it is used.
//! Defined in `mgws-core`, whose task context checks them (`TaskContext::read`, `write`).

pub use mgws_core::data::{Access, DataDescriptor};
