//! Neutron's resources: networks, subnets (with IP allocation), security groups and ports.

use std::net::IpAddr;
use std::time::SystemTime;

/// A network.
#[derive(Debug, Clone)]
pub(crate) struct Network {
    /// UUID.
    pub(crate) id: String,
    /// Name.
    pub(crate) name: String,
    /// Owning project.
    pub(crate) project_id: String,
    /// Its subnets' ids.
    pub(crate) subnets: Vec<String>,
}

/// A subnet with a simple sequential allocator.
#[derive(Debug, Clone)]
pub(crate) struct Subnet {
    /// UUID.
    pub(crate) id: String,
    /// Name.
    pub(crate) name: String,
    /// Its network.
    pub(crate) network_id: String,
    /// Owning project.
    pub(crate) project_id: String,
    /// `4` or `6`.
    pub(crate) ip_version: u8,
    /// Network address.
    pub(crate) network: IpAddr,
    /// Prefix length.
    pub(crate) prefix_len: u32,
    /// Gateway address.
    pub(crate) gateway: IpAddr,
    /// Next host offset to hand out.
    pub(crate) next_host: u128,
}

fn bits(ip: IpAddr) -> (u128, u32) {
    match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn from_bits(value: u128, width: u32) -> Option<IpAddr> {
    if width == 32 { u32::try_from(value).ok().map(|v| IpAddr::V4(v.into())) } else { Some(IpAddr::V6(value.into())) }
}

impl Subnet {
    /// `cidr`.
    pub(crate) fn cidr(&self) -> String {
        format!("{}/{}", self.network, self.prefix_len)
    }

    /// Whether `ip` lies in the subnet.
    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let (net, width) = bits(self.network);
        let (value, other_width) = bits(ip);
        if width != other_width {
            return false;
        }
        let host_bits = width - self.prefix_len;
        let mask = if host_bits >= 128 { 0 } else { u128::MAX << host_bits };
        let mask = if width == 32 { mask & u128::from(u32::MAX) } else { mask };
        (value & mask) == (net & mask)
    }

    /// The address at host offset `host`, if still inside the subnet.
    pub(crate) fn host(&self, host: u128) -> Option<IpAddr> {
        let (net, width) = bits(self.network);
        let ip = from_bits(net.checked_add(host)?, width)?;
        self.contains(ip).then_some(ip)
    }
}

/// A security group.
#[derive(Debug, Clone)]
pub(crate) struct SecurityGroup {
    /// UUID.
    pub(crate) id: String,
    /// Name.
    pub(crate) name: String,
    /// Owning project.
    pub(crate) project_id: String,
    /// Description.
    pub(crate) description: String,
}

/// One fixed IP of a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FixedIp {
    /// Subnet id.
    pub(crate) subnet_id: String,
    /// Address.
    pub(crate) ip_address: String,
}

/// One allowed address pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddressPair {
    /// IP or CIDR.
    pub(crate) ip_address: String,
    /// MAC address.
    pub(crate) mac_address: String,
}

/// A Neutron port.
#[derive(Debug, Clone)]
pub(crate) struct Port {
    /// UUID.
    pub(crate) id: String,
    /// Owning project.
    pub(crate) project_id: String,
    /// Name.
    pub(crate) name: String,
    /// Description.
    pub(crate) description: String,
    /// Network.
    pub(crate) network_id: String,
    /// MAC address.
    pub(crate) mac_address: String,
    /// `ACTIVE` or `DOWN`.
    pub(crate) status: &'static str,
    /// Server id or "".
    pub(crate) device_id: String,
    /// `compute:<az>` or "".
    pub(crate) device_owner: String,
    /// Fixed IPs.
    pub(crate) fixed_ips: Vec<FixedIp>,
    /// Security group ids.
    pub(crate) security_groups: Vec<String>,
    /// Allowed address pairs.
    pub(crate) allowed_address_pairs: Vec<AddressPair>,
    /// Tags.
    pub(crate) tags: Vec<String>,
    /// Created.
    pub(crate) created: SystemTime,
    /// Updated.
    pub(crate) updated: SystemTime,
    /// `revision_number`.
    pub(crate) revision: u64,
    /// Created by Nova for a `{"uuid": NET}` network request (deleted with the server).
    pub(crate) made_by_nova: bool,
}

impl Port {
    /// Bumps the revision and the update time.
    pub(crate) fn touch(&mut self) {
        self.revision += 1;
        self.updated = SystemTime::now();
    }

    /// Detaches it from its server.
    pub(crate) fn detach(&mut self) {
        self.device_id.clear();
        self.device_owner.clear();
        self.status = "DOWN";
        self.touch();
    }
}

/// A random OpenStack-style MAC address (`fa:16:3e:..`).
pub(crate) fn random_mac() -> String {
    let bytes: [u8; 3] = rand::random();
    format!("fa:16:3e:{:02x}:{:02x}:{:02x}", bytes[0], bytes[1], bytes[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(cidr: &str, prefix_len: u32) -> Subnet {
        let network: IpAddr = cidr.parse().expect("ip");
        Subnet {
            id: "s".into(),
            name: "s".into(),
            network_id: "n".into(),
            project_id: "p".into(),
            ip_version: if network.is_ipv4() { 4 } else { 6 },
            network,
            prefix_len,
            gateway: network,
            next_host: 10,
        }
    }

    #[test]
    fn contains_and_hosts() {
        let v4 = subnet("10.250.0.0", 16);
        assert!(v4.contains("10.250.3.4".parse().expect("ip")));
        assert!(!v4.contains("10.251.0.1".parse().expect("ip")));
        assert!(!v4.contains("fd00::1".parse().expect("ip")));
        assert_eq!(v4.host(10).map(|ip| ip.to_string()), Some("10.250.0.10".into()));
        assert_eq!(v4.host(1 << 16), None);
        let v6 = subnet("fd00:10:250::", 64);
        assert_eq!(v6.host(10).map(|ip| ip.to_string()), Some("fd00:10:250::a".into()));
        assert!(!v6.contains("fd00:10:251::1".parse().expect("ip")));
    }
}
