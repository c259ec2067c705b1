//! The semantic suite on the embedded backend.
mod common;

suite!(None, []);
