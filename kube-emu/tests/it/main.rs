//! Integration tests of kube-emu: kube-rs clients, a kube-runtime Controller, a TLS webhook and
//! the real kubectl against an emulator started in-process.

mod common;
mod controller;
mod crud;
mod kubectl;
mod rbac;
mod ssa;
mod watch;
mod webhook;
