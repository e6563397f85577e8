//! Parsing ARM resource ids found in request bodies (case-insensitive segment names).

/// `(subscription, resource group, name)` of `/subscriptions/S/resourceGroups/RG/providers/NS/TYPE/NAME`.
pub(crate) fn resource(id: &str, namespace: &str, resource_type: &str) -> Option<(String, String, String)> {
    let segs: Vec<&str> = id.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [sg, sub, rgs, rg, pv, ns, ty, name]
            if sg.eq_ignore_ascii_case("subscriptions")
                && rgs.eq_ignore_ascii_case("resourceGroups")
                && pv.eq_ignore_ascii_case("providers")
                && ns.eq_ignore_ascii_case(namespace)
                && ty.eq_ignore_ascii_case(resource_type) =>
        {
            Some(((*sub).to_owned(), (*rg).to_owned(), (*name).to_owned()))
        }
        _ => None,
    }
}

/// A gallery image (version) reference: `(sub, rg, gallery, image, version or None = latest)`.
pub(crate) type GalleryRef = (String, String, String, String, Option<String>);

/// Parses `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/galleries/G/images/I[/versions/V]`.
pub(crate) fn gallery_version(id: &str) -> Option<GalleryRef> {
    let segs: Vec<&str> = id.split('/').filter(|s| !s.is_empty()).collect();
    let is = |s: &str, w: &str| s.eq_ignore_ascii_case(w);
    match segs.as_slice() {
        [sg, sub, rgs, rg, pv, ns, gs, g, im, i, rest @ ..]
            if is(sg, "subscriptions")
                && is(rgs, "resourceGroups")
                && is(pv, "providers")
                && is(ns, "Microsoft.Compute")
                && is(gs, "galleries")
                && is(im, "images") =>
        {
            let version = match rest {
                [] => None,
                [vs, v] if is(vs, "versions") => Some((*v).to_owned()),
                _ => return None,
            };
            Some(((*sub).to_owned(), (*rg).to_owned(), (*g).to_owned(), (*i).to_owned(), version))
        }
        _ => None,
    }
}

/// Parses `/{prefix}/NAME/Images/I[/Versions/V]` (`SharedGalleries`, `CommunityGalleries`).
pub(crate) fn direct_gallery(id: &str, prefix: &str) -> Option<(String, String, Option<String>)> {
    let segs: Vec<&str> = id.split('/').filter(|s| !s.is_empty()).collect();
    let is = |s: &str, w: &str| s.eq_ignore_ascii_case(w);
    match segs.as_slice() {
        [p, g, im, i] if is(p, prefix) && is(im, "Images") => Some(((*g).to_owned(), (*i).to_owned(), None)),
        [p, g, im, i, vs, v] if is(p, prefix) && is(im, "Images") && is(vs, "Versions") => {
            Some(((*g).to_owned(), (*i).to_owned(), Some((*v).to_owned())))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse() {
        assert_eq!(
            resource(
                "/subscriptions/s/resourcegroups/rg/providers/microsoft.network/networkinterfaces/n",
                "Microsoft.Network",
                "networkInterfaces"
            ),
            Some(("s".into(), "rg".into(), "n".into()))
        );
        assert!(
            resource(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d",
                "Microsoft.Network",
                "networkInterfaces"
            )
            .is_none()
        );
        assert_eq!(
            gallery_version(crate::ALLOWED_IMAGE).map(|g| (g.2, g.3, g.4)),
            Some(("gardenlinux".into(), "gardenlinux".into(), Some("1.0.0".into())))
        );
        assert_eq!(
            direct_gallery("/SharedGalleries/u/Images/i/Versions/1.0.0", "SharedGalleries"),
            Some(("u".into(), "i".into(), Some("1.0.0".into())))
        );
    }
}
