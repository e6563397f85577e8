//! ARM paths: parsing them case-insensitively (segment names, namespaces and types),
//! and the operation name and RBAC action of each route and method.

use axum::http::Method;

use crate::error::ArmError;
use fake_cloud_support::wire::decode_component;

/// The three resource types that have item and collection routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `Microsoft.Compute/virtualMachines`.
    Vm,
    /// `Microsoft.Network/networkInterfaces`.
    Nic,
    /// `Microsoft.Compute/disks`.
    Disk,
}

/// A parsed ARM path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/providers/Microsoft.ResourceGraph/resources` (Azure Resource Graph; no subscription in the path).
    Graph,
    /// `/subscriptions/S/resourceGroups/RG`.
    ResourceGroup { sub: String, rg: String },
    /// `/subscriptions/S/resourceGroups/RG/resources`.
    Resources { sub: String, rg: String },
    /// A VM, NIC or disk collection of a resource group.
    Collection { sub: String, rg: String, kind: Kind },
    /// One VM, NIC or disk.
    Resource { sub: String, rg: String, kind: Kind, name: String },
    /// The tags of one VM, NIC or disk: `{resource}/providers/Microsoft.Resources/tags/default`.
    Tags { sub: String, rg: String, kind: Kind, name: String },
    /// `.../Microsoft.Network/virtualNetworks/V/subnets/N`.
    Subnet { sub: String, rg: String, vnet: String, name: String },
    /// `.../Microsoft.Compute/galleries/G`.
    Gallery { sub: String, rg: String, gallery: String },
    /// `.../Microsoft.Compute/galleries/G/share`.
    GalleryShare { sub: String, rg: String, gallery: String },
    /// `.../galleries/G/images/I`.
    GalleryImage { sub: String, rg: String, gallery: String, image: String },
    /// `.../galleries/G/images/I/versions/V`.
    GalleryImageVersion { sub: String, rg: String, gallery: String, image: String, version: String },
    /// `/subscriptions/S/providers/NS/locations/L/operations/ID` (or `operationResults`).
    Operation { sub: String, id: String, results: bool },
    /// `/subscriptions/S/providers/Microsoft.Compute/locations/L/sharedGalleries/U/images/I/versions/V`.
    SharedVersion { sub: String, location: String, gallery: String, image: String, version: String },
    /// `/subscriptions/S/providers/Microsoft.Compute/locations/L/publishers/P/artifacttypes/vmimage/offers/O/skus/K/versions/V`.
    VmImage { sub: String, location: String, publisher: String, offer: String, sku: String, version: String },
    /// `/subscriptions/S/providers/Microsoft.Compute/locations/L/communityGalleries/G/images/I/versions/V`.
    CommunityVersion { sub: String, location: String, gallery: String, image: String, version: String },
    /// `/subscriptions/S/providers/Microsoft.MarketplaceOrdering/offerTypes/T/publishers/P/offers/O/plans/N/agreements/current`.
    Agreement { sub: String, offer_type: String, publisher: String, offer: String, plan: String },
}

fn is(segment: &str, word: &str) -> bool {
    segment.eq_ignore_ascii_case(word)
}

/// Parses a request path; unknown paths give ARM's 404 answer.
pub(crate) fn parse(path: &str, api_version: &str) -> Result<Route, ArmError> {
    let segs: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(decode_component).collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let not_found = || {
        ArmError::new(
            axum::http::StatusCode::NOT_FOUND,
            "NotFound",
            format!("The requested resource path '{path}' was not found."),
        )
    };
    let own = |v: &str| v.to_owned();
    match s.as_slice() {
        [pv, ns, res] if is(pv, "providers") && is(ns, "Microsoft.ResourceGraph") && is(res, "resources") => {
            Ok(Route::Graph)
        }
        [sg, sub, rgs, rg] if is(sg, "subscriptions") && is(rgs, "resourcegroups") => {
            Ok(Route::ResourceGroup { sub: own(sub), rg: own(rg) })
        }
        [sg, sub, rgs, rg, res] if is(sg, "subscriptions") && is(rgs, "resourcegroups") && is(res, "resources") => {
            Ok(Route::Resources { sub: own(sub), rg: own(rg) })
        }
        [sg, sub, rgs, rg, pv, ns, ty, rest @ ..]
            if is(sg, "subscriptions") && is(rgs, "resourcegroups") && is(pv, "providers") =>
        {
            let (sub, rg) = (own(sub), own(rg));
            let kind = if is(ns, "Microsoft.Compute") && is(ty, "virtualMachines") {
                Some(Kind::Vm)
            } else if is(ns, "Microsoft.Network") && is(ty, "networkInterfaces") {
                Some(Kind::Nic)
            } else if is(ns, "Microsoft.Compute") && is(ty, "disks") {
                Some(Kind::Disk)
            } else {
                None
            };
            if let Some(kind) = kind {
                return match rest {
                    [] => Ok(Route::Collection { sub, rg, kind }),
                    [name] => Ok(Route::Resource { sub, rg, kind, name: own(name) }),
                    [name, pv, ns, tags, default]
                        if is(pv, "providers")
                            && is(ns, "Microsoft.Resources")
                            && is(tags, "tags")
                            && is(default, "default") =>
                    {
                        Ok(Route::Tags { sub, rg, kind, name: own(name) })
                    }
                    _ => Err(not_found()),
                };
            }
            if is(ns, "Microsoft.Network") && is(ty, "virtualNetworks") {
                return match rest {
                    [vnet, sn, name] if is(sn, "subnets") => {
                        Ok(Route::Subnet { sub, rg, vnet: own(vnet), name: own(name) })
                    }
                    _ => Err(not_found()),
                };
            }
            if is(ns, "Microsoft.Compute") && is(ty, "galleries") {
                return match rest {
                    [g] => Ok(Route::Gallery { sub, rg, gallery: own(g) }),
                    [g, share] if is(share, "share") => Ok(Route::GalleryShare { sub, rg, gallery: own(g) }),
                    [g, im, i] if is(im, "images") => {
                        Ok(Route::GalleryImage { sub, rg, gallery: own(g), image: own(i) })
                    }
                    [g, im, i, vs, v] if is(im, "images") && is(vs, "versions") => {
                        Ok(Route::GalleryImageVersion { sub, rg, gallery: own(g), image: own(i), version: own(v) })
                    }
                    _ => Err(not_found()),
                };
            }
            if is(ns, "Microsoft.Compute") || is(ns, "Microsoft.Network") || is(ns, "Microsoft.Resources") {
                Err(ArmError::invalid_resource_type(ty, ns, api_version))
            } else {
                Err(ArmError::invalid_namespace(ns))
            }
        }
        [sg, sub, pv, ns, ls, _loc, ops, id]
            if is(sg, "subscriptions")
                && is(pv, "providers")
                && (is(ns, "Microsoft.Compute") || is(ns, "Microsoft.Network"))
                && is(ls, "locations")
                && (is(ops, "operations") || is(ops, "operationResults") || is(ops, "asyncoperations")) =>
        {
            Ok(Route::Operation { sub: own(sub), id: own(id), results: is(ops, "operationResults") })
        }
        [sg, sub, pv, ns, ls, loc, sgs, g, im, i, vs, v]
            if is(sg, "subscriptions")
                && is(pv, "providers")
                && is(ns, "Microsoft.Compute")
                && is(ls, "locations")
                && is(sgs, "sharedGalleries")
                && is(im, "images")
                && is(vs, "versions") =>
        {
            Ok(Route::SharedVersion {
                sub: own(sub),
                location: own(loc),
                gallery: own(g),
                image: own(i),
                version: own(v),
            })
        }
        [sg, sub, pv, ns, ls, loc, cgs, g, im, i, vs, v]
            if is(sg, "subscriptions")
                && is(pv, "providers")
                && is(ns, "Microsoft.Compute")
                && is(ls, "locations")
                && is(cgs, "communityGalleries")
                && is(im, "images")
                && is(vs, "versions") =>
        {
            Ok(Route::CommunityVersion {
                sub: own(sub),
                location: own(loc),
                gallery: own(g),
                image: own(i),
                version: own(v),
            })
        }
        [sg, sub, pv, ns, ots, ot, ps, p, os, o, pls, plan, ags, current]
            if is(sg, "subscriptions")
                && is(pv, "providers")
                && is(ns, "Microsoft.MarketplaceOrdering")
                && is(ots, "offerTypes")
                && is(ps, "publishers")
                && is(os, "offers")
                && is(pls, "plans")
                && is(ags, "agreements")
                && is(current, "current") =>
        {
            Ok(Route::Agreement {
                sub: own(sub),
                offer_type: own(ot),
                publisher: own(p),
                offer: own(o),
                plan: own(plan),
            })
        }
        [sg, sub, pv, ns, ls, loc, ps, p, at, vmimage, os, o, ks, k, vs, v]
            if is(sg, "subscriptions")
                && is(pv, "providers")
                && is(ns, "Microsoft.Compute")
                && is(ls, "locations")
                && is(ps, "publishers")
                && is(at, "artifacttypes")
                && is(vmimage, "vmimage")
                && is(os, "offers")
                && is(ks, "skus")
                && is(vs, "versions") =>
        {
            Ok(Route::VmImage {
                sub: own(sub),
                location: own(loc),
                publisher: own(p),
                offer: own(o),
                sku: own(k),
                version: own(v),
            })
        }
        [sg, _sub, pv, ns, ty, ..] if is(sg, "subscriptions") && is(pv, "providers") => {
            if is(ns, "Microsoft.Compute") || is(ns, "Microsoft.Network") || is(ns, "Microsoft.MarketplaceOrdering") {
                Err(ArmError::invalid_resource_type(ty, ns, api_version))
            } else {
                Err(ArmError::invalid_namespace(ns))
            }
        }
        _ => Err(not_found()),
    }
}

impl Route {
    /// The subscription in the path.
    pub(crate) fn subscription(&self) -> &str {
        match self {
            Self::Graph => "",
            Self::ResourceGroup { sub, .. }
            | Self::Resources { sub, .. }
            | Self::Collection { sub, .. }
            | Self::Resource { sub, .. }
            | Self::Tags { sub, .. }
            | Self::Subnet { sub, .. }
            | Self::Gallery { sub, .. }
            | Self::GalleryShare { sub, .. }
            | Self::GalleryImage { sub, .. }
            | Self::GalleryImageVersion { sub, .. }
            | Self::Operation { sub, .. }
            | Self::SharedVersion { sub, .. }
            | Self::VmImage { sub, .. }
            | Self::CommunityVersion { sub, .. }
            | Self::Agreement { sub, .. } => sub,
        }
    }

    /// The operation name of `method` on this route (`None`: method not supported).
    pub(crate) fn operation(&self, method: &Method) -> Option<&'static str> {
        let m = method.as_str();
        Some(match (self, m) {
            (Self::Graph, "POST") => "resourceGraph.resources",
            (Self::ResourceGroup { .. }, "GET") => "resourceGroups.get",
            (Self::ResourceGroup { .. }, "HEAD") => "resourceGroups.checkExistence",
            (Self::Resources { .. }, "GET") => "resources.listByResourceGroup",
            (Self::Collection { kind: Kind::Vm, .. }, "GET") => "virtualMachines.list",
            (Self::Collection { kind: Kind::Nic, .. }, "GET") => "networkInterfaces.list",
            (Self::Collection { kind: Kind::Disk, .. }, "GET") => "disks.listByResourceGroup",
            (Self::Resource { kind: Kind::Vm, .. }, "PUT") => "virtualMachines.createOrUpdate",
            (Self::Resource { kind: Kind::Vm, .. }, "PATCH") => "virtualMachines.update",
            (Self::Resource { kind: Kind::Vm, .. }, "GET") => "virtualMachines.get",
            (Self::Resource { kind: Kind::Vm, .. }, "DELETE") => "virtualMachines.delete",
            (Self::Resource { kind: Kind::Nic, .. }, "PUT") => "networkInterfaces.createOrUpdate",
            (Self::Resource { kind: Kind::Nic, .. }, "GET") => "networkInterfaces.get",
            (Self::Resource { kind: Kind::Nic, .. }, "DELETE") => "networkInterfaces.delete",
            (Self::Resource { kind: Kind::Disk, .. }, "PUT") => "disks.createOrUpdate",
            (Self::Resource { kind: Kind::Disk, .. }, "PATCH") => "disks.update",
            (Self::Resource { kind: Kind::Disk, .. }, "GET") => "disks.get",
            (Self::Resource { kind: Kind::Disk, .. }, "DELETE") => "disks.delete",
            (Self::Tags { .. }, "GET") => "tags.getAtScope",
            (Self::Tags { .. }, "PUT") => "tags.createOrUpdateAtScope",
            (Self::Tags { .. }, "PATCH") => "tags.updateAtScope",
            (Self::Subnet { .. }, "GET") => "subnets.get",
            (Self::Gallery { .. }, "GET") => "galleries.get",
            (Self::GalleryShare { .. }, "POST") => "gallerySharingProfile.update",
            (Self::GalleryImage { .. }, "GET") => "galleryImages.get",
            (Self::GalleryImageVersion { .. }, "GET") => "galleryImageVersions.get",
            (Self::Operation { .. }, "GET") => "operations.get",
            (Self::SharedVersion { .. }, "GET") => "sharedGalleryImageVersions.get",
            (Self::VmImage { .. }, "GET") => "virtualMachineImages.get",
            (Self::CommunityVersion { .. }, "GET") => "communityGalleryImageVersions.get",
            (Self::Agreement { .. }, "GET") => "marketplaceAgreements.get",
            (Self::Agreement { .. }, "PUT") => "marketplaceAgreements.create",
            _ => return None,
        })
    }
}

/// The RBAC action ARM checks for an operation (for `AuthorizationFailed` messages).
pub(crate) fn action_of(operation: &str) -> &'static str {
    match operation {
        "virtualMachines.createOrUpdate" | "virtualMachines.update" => "Microsoft.Compute/virtualMachines/write",
        "virtualMachines.get" | "virtualMachines.list" => "Microsoft.Compute/virtualMachines/read",
        "virtualMachines.delete" => "Microsoft.Compute/virtualMachines/delete",
        "networkInterfaces.createOrUpdate" => "Microsoft.Network/networkInterfaces/write",
        "networkInterfaces.get" | "networkInterfaces.list" => "Microsoft.Network/networkInterfaces/read",
        "networkInterfaces.delete" => "Microsoft.Network/networkInterfaces/delete",
        "disks.createOrUpdate" | "disks.update" => "Microsoft.Compute/disks/write",
        "disks.get" | "disks.listByResourceGroup" => "Microsoft.Compute/disks/read",
        "disks.delete" => "Microsoft.Compute/disks/delete",
        "resources.listByResourceGroup" => "Microsoft.Resources/subscriptions/resourceGroups/resources/read",
        "resourceGroups.get" | "resourceGroups.checkExistence" => {
            "Microsoft.Resources/subscriptions/resourceGroups/read"
        }
        "subnets.get" => "Microsoft.Network/virtualNetworks/subnets/read",
        "tags.getAtScope" => "Microsoft.Resources/tags/read",
        "tags.createOrUpdateAtScope" | "tags.updateAtScope" => "Microsoft.Resources/tags/write",
        "galleries.get" => "Microsoft.Compute/galleries/read",
        "galleryImages.get" => "Microsoft.Compute/galleries/images/read",
        "galleryImageVersions.get" => "Microsoft.Compute/galleries/images/versions/read",
        "gallerySharingProfile.update" => "Microsoft.Compute/galleries/share/action",
        "sharedGalleryImageVersions.get" => "Microsoft.Compute/locations/sharedGalleries/images/versions/read",
        "resourceGraph.resources" => "Microsoft.ResourceGraph/resources/read",
        "virtualMachineImages.get" => "Microsoft.Compute/locations/publishers/artifacttypes/offers/skus/versions/read",
        "communityGalleryImageVersions.get" => "Microsoft.Compute/locations/communityGalleries/images/versions/read",
        "marketplaceAgreements.get" => {
            "Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/read"
        }
        "marketplaceAgreements.create" => {
            "Microsoft.MarketplaceOrdering/offertypes/publishers/offers/plans/agreements/write"
        }
        _ => "Microsoft.Resources/subscriptions/read",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_case_insensitively() {
        let route =
            parse("/SUBSCRIPTIONS/s/resourcegroups/rg/providers/microsoft.compute/VIRTUALMACHINES/Vm-1", "2024-07-01")
                .expect("vm");
        assert_eq!(route, Route::Resource { sub: "s".into(), rg: "rg".into(), kind: Kind::Vm, name: "Vm-1".into() });
        assert_eq!(route.operation(&Method::PUT), Some("virtualMachines.createOrUpdate"));
        assert_eq!(route.operation(&Method::POST), None);
        let op = parse("/subscriptions/s/providers/Microsoft.Network/locations/westeurope/operationResults/x", "v")
            .expect("op");
        assert_eq!(op, Route::Operation { sub: "s".into(), id: "x".into(), results: true });
        let err = parse("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachinez/x", "v")
            .expect_err("unknown type");
        assert_eq!(err.code, "InvalidResourceType");
        assert_eq!(parse("/nope", "v").expect_err("404").status, axum::http::StatusCode::NOT_FOUND);
    }
}
