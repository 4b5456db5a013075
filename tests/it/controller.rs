//! Controller tests (issue 15): the Platform and TransformerRegistration reconcilers, their
//! watches, leader election and restart recovery, against kube-emu with fake kernel seams.

mod common;
mod manager;
mod platform;
mod registration;
mod serve;
