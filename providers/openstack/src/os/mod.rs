//! A thin typed client of the OpenStack APIs the driver uses (about fifteen
//! calls of Keystone v3, Nova, Neutron and Glance v2) on the
//! workspace's reqwest, instead of the `openstack_sdk` family (see the crate
//! README for the measured cost of that choice).

pub(crate) mod keystone;
pub(crate) mod model;
pub(crate) mod request;
pub(crate) mod session;
