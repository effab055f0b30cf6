//! Running compiled programs: on the kernel module, and on the simulator the tests use.

pub mod sim;
