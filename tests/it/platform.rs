//! The platform kernel on the real registry and file system: generation, build, the store under
//! crash and stress.

pub mod crash;
pub mod gen;
pub mod stress;
