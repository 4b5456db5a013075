//! Integration tests of kube-emu: kube-rs clients, a kube-runtime Controller, a TLS webhook and
//! the real kubectl against an emulator started in-process.

// Test helpers outside #[test] functions fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod authn;
mod binary;
mod builtin;
mod common;
mod controller;
mod crud;
mod fault;
mod kubectl;
mod rbac;
mod simulate;
mod ssa;
mod watch;
mod webhook;
