//! The parts of OpenStack's JSON answers the driver reads. Every field has a
//! default, so an answer with more or fewer fields (another microversion or
//! release) still parses.

use std::collections::BTreeMap;

use serde::Deserialize;

/// A link of a paged list (`servers_links`, `ports_links`, `volumes_links`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Link {
    /// `next` for the following page.
    #[serde(default)]
    pub(crate) rel: String,
    /// Absolute URL of the page.
    #[serde(default)]
    pub(crate) href: String,
}

/// The `next` link of a page, if any.
pub(crate) fn next_link(links: &[Link]) -> Option<&str> {
    links.iter().find(|l| l.rel == "next").map(|l| l.href.as_str()).filter(|h| !h.is_empty())
}

/// A Nova server (`GET /servers/{id}`, `/servers/detail`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Server {
    /// Server id.
    #[serde(default)]
    pub(crate) id: String,
    /// Server name (the machine name).
    #[serde(default)]
    pub(crate) name: String,
    /// `BUILD`, `ACTIVE`, `ERROR`, `SHUTOFF`, `DELETED`, ...
    #[serde(default)]
    pub(crate) status: String,
    /// `scheduling`, `spawning`, `deleting`, ... or null.
    #[serde(default, rename = "OS-EXT-STS:task_state")]
    pub(crate) task_state: Option<String>,
    /// Network name → addresses.
    #[serde(default)]
    pub(crate) addresses: BTreeMap<String, Vec<ServerAddress>>,
    /// Metadata (the machine class tags and the machine uid).
    #[serde(default)]
    pub(crate) metadata: BTreeMap<String, String>,
    /// Why the server is in ERROR.
    #[serde(default)]
    pub(crate) fault: Option<Fault>,
    /// Its flavor (microversion 2.47 on: the flavor's copy, `original_name`).
    #[serde(default)]
    pub(crate) flavor: ServerFlavor,
    /// The image it booted from; `None` for a server booted from a volume
    /// (Nova answers `""` then).
    #[serde(default, deserialize_with = "server_image")]
    pub(crate) image: Option<String>,
    /// Its availability zone.
    #[serde(default, rename = "OS-EXT-AZ:availability_zone")]
    pub(crate) availability_zone: String,
}

/// A server's `flavor`: from microversion 2.47 on a copy of the flavor
/// (`original_name`), before it a reference (`id`).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ServerFlavor {
    /// The flavor's name when the server was made (2.47 on).
    #[serde(default)]
    pub(crate) original_name: Option<String>,
    /// The flavor's id (before 2.47).
    #[serde(default)]
    pub(crate) id: Option<String>,
}

/// A server's `image`: `{"id": …, "links": …}`, or `""` when it booted from a volume.
fn server_image<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Image {
        Ref {
            #[serde(default)]
            id: String,
        },
        Other(serde::de::IgnoredAny),
    }
    Ok(match Image::deserialize(d)? {
        Image::Ref { id } if !id.is_empty() => Some(id),
        _ => None,
    })
}

impl Server {
    /// True while a delete of the server is under way.
    pub(crate) fn is_deleting(&self) -> bool {
        self.task_state.as_deref() == Some("deleting")
            || self.status.eq_ignore_ascii_case("DELETED")
            || self.status.eq_ignore_ascii_case("SOFT_DELETED")
    }
}

/// One address of a server.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ServerAddress {
    /// The IP.
    #[serde(default)]
    pub(crate) addr: String,
}

/// A server's fault (ERROR).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Fault {
    /// Nova's message.
    #[serde(default)]
    pub(crate) message: String,
}

/// `{"server": ...}`.
#[derive(Debug, Deserialize)]
pub(crate) struct ServerOne {
    /// The server.
    pub(crate) server: Server,
}

/// A page of `GET /servers/detail`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ServersPage {
    /// The servers.
    #[serde(default)]
    pub(crate) servers: Vec<Server>,
    /// `next` when the page is full.
    #[serde(default)]
    pub(crate) servers_links: Vec<Link>,
}

/// A flavor.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Flavor {
    /// Flavor id (what `flavorRef` takes).
    #[serde(default)]
    pub(crate) id: String,
    /// Flavor name (what the class names).
    #[serde(default)]
    pub(crate) name: String,
}

/// A page of `GET /flavors/detail`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FlavorsPage {
    /// The flavors.
    #[serde(default)]
    pub(crate) flavors: Vec<Flavor>,
    /// `next` when the page is full.
    #[serde(default)]
    pub(crate) flavors_links: Vec<Link>,
}

/// A Neutron port.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Port {
    /// Port id.
    #[serde(default)]
    pub(crate) id: String,
    /// Port name (the machine name for ports the driver makes).
    #[serde(default)]
    pub(crate) name: String,
    /// Its network.
    #[serde(default)]
    pub(crate) network_id: String,
    /// The server it is attached to ("" when free).
    #[serde(default)]
    pub(crate) device_id: String,
    /// Allowed address pairs.
    #[serde(default)]
    pub(crate) allowed_address_pairs: Vec<AddressPair>,
    /// Tags.
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    /// Security group ids.
    #[serde(default)]
    pub(crate) security_groups: Vec<String>,
    /// Revision (for `If-Match`), when Neutron reports it.
    #[serde(default)]
    pub(crate) revision_number: Option<u64>,
}

/// An allowed address pair.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
pub(crate) struct AddressPair {
    /// An IP or CIDR.
    pub(crate) ip_address: String,
    /// The MAC (the port's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mac_address: Option<String>,
}

/// `{"port": ...}`.
#[derive(Debug, Deserialize)]
pub(crate) struct PortOne {
    /// The port.
    pub(crate) port: Port,
}

/// A page of `GET /ports`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PortsPage {
    /// The ports.
    #[serde(default)]
    pub(crate) ports: Vec<Port>,
    /// `next` when the page is full.
    #[serde(default)]
    pub(crate) ports_links: Vec<Link>,
}

/// A network or security group: only the id is read.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Named {
    /// Id.
    #[serde(default)]
    pub(crate) id: String,
}

/// `GET /networks`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct NetworksPage {
    /// The networks.
    #[serde(default)]
    pub(crate) networks: Vec<Named>,
    /// `next` when Neutron pages the list.
    #[serde(default)]
    pub(crate) networks_links: Vec<Link>,
}

/// `GET /security-groups`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SecurityGroupsPage {
    /// The security groups.
    #[serde(default)]
    pub(crate) security_groups: Vec<Named>,
    /// `next` when Neutron pages the list.
    #[serde(default)]
    pub(crate) security_groups_links: Vec<Link>,
}

/// A Glance image.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Image {
    /// Image id.
    #[serde(default)]
    pub(crate) id: String,
    /// Image name.
    #[serde(default)]
    pub(crate) name: String,
    /// `public`, `community`, `shared`, `private`.
    #[serde(default)]
    pub(crate) visibility: String,
    /// Owner project id.
    #[serde(default)]
    pub(crate) owner: String,
}

/// A page of `GET /v2/images`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ImagesPage {
    /// The images.
    #[serde(default)]
    pub(crate) images: Vec<Image>,
    /// The next page (`/v2/images?marker=…`), when the page is full.
    #[serde(default)]
    pub(crate) next: Option<String>,
}

/// A member of an image.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Member {
    /// The member project.
    #[serde(default)]
    pub(crate) member_id: String,
    /// `pending`, `accepted`, `rejected`.
    #[serde(default)]
    pub(crate) status: String,
}

/// `GET /v2/images/{id}/members`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct MembersPage {
    /// The members.
    #[serde(default)]
    pub(crate) members: Vec<Member>,
}

/// A Cinder volume (`GET /volumes/detail`): what the clean-up of a boot volume
/// the Go provider made reads ([`crate::go_volumes`]).
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Volume {
    /// Volume id.
    #[serde(default)]
    pub(crate) id: String,
    /// Volume name (the Go provider names a boot volume after its machine).
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// `available`, `in-use`, `deleting`, `error`, ...
    #[serde(default)]
    pub(crate) status: String,
    /// Metadata (the Go provider puts the class's tags there).
    #[serde(default)]
    pub(crate) metadata: BTreeMap<String, String>,
    /// The servers it is attached to.
    #[serde(default)]
    pub(crate) attachments: Vec<VolumeAttachment>,
}

/// One attachment of a volume.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct VolumeAttachment {
    /// The server.
    #[serde(default)]
    pub(crate) server_id: String,
}

/// A page of `GET /volumes/detail`.
#[derive(Debug, Deserialize)]
pub(crate) struct VolumesPage {
    /// The volumes.
    #[serde(default)]
    pub(crate) volumes: Vec<Volume>,
    /// `next` when there are more.
    #[serde(default)]
    pub(crate) volumes_links: Vec<Link>,
}
