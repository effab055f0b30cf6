// SPDX-License-Identifier: GPL-2.0

//! Kernel objects and policy: the device, its consumers, their sessions (loaded programs),
//! dynamic memory and Intel PT. Everything here reaches the kernel through [`crate::sys`].

pub(crate) mod budget;
pub(crate) mod consumer;
pub(crate) mod device;
pub(crate) mod dynmem;
pub(crate) mod fire;
pub(crate) mod image;
pub(crate) mod provider;
pub(crate) mod pt;
pub(crate) mod session;
pub(crate) mod spec;
