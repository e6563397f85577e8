//! A minimal XML writer for the EC2 and STS response bodies.

use std::fmt::Display;

/// The EC2 API namespace of every EC2 response.
pub(crate) const EC2_NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";
/// The STS API namespace.
pub(crate) const STS_NAMESPACE: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

/// Escapes text for element content.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Builds an XML document element by element.
#[derive(Debug, Default)]
pub(crate) struct Xml {
    out: String,
}

impl Xml {
    /// An empty document body.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// `<tag>` + children + `</tag>`.
    pub(crate) fn elem(&mut self, tag: &str, children: impl FnOnce(&mut Xml)) -> &mut Self {
        self.out.push('<');
        self.out.push_str(tag);
        self.out.push('>');
        children(self);
        self.out.push_str("</");
        self.out.push_str(tag);
        self.out.push('>');
        self
    }

    /// `<tag>text</tag>`, escaped.
    pub(crate) fn leaf(&mut self, tag: &str, text: impl Display) -> &mut Self {
        let text = escape(&text.to_string());
        self.out.push_str(&format!("<{tag}>{text}</{tag}>"));
        self
    }

    /// A leaf only when the value is present.
    pub(crate) fn opt_leaf<T: Display>(&mut self, tag: &str, text: Option<T>) -> &mut Self {
        if let Some(text) = text {
            self.leaf(tag, text);
        }
        self
    }

    /// `<tag><item>..</item>...</tag>`, one item per element of `items`.
    pub(crate) fn items<T>(
        &mut self,
        tag: &str,
        items: impl IntoIterator<Item = T>,
        mut item: impl FnMut(&mut Xml, T),
    ) -> &mut Self {
        self.elem(tag, |x| {
            for value in items {
                x.elem("item", |x| item(x, value));
            }
        })
    }

    /// The accumulated text.
    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// Wraps an EC2 response body: `<{Action}Response xmlns=...><requestId>..</requestId>{body}</..>`.
pub(crate) fn ec2_document(action: &str, request_id: &str, body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{EC2_NAMESPACE}\"><requestId>{request_id}</requestId>{body}</{action}Response>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_escaped_elements() {
        let mut x = Xml::new();
        x.elem("a", |x| {
            x.leaf("b", "1 < 2 & 'q'");
            x.opt_leaf("c", None::<&str>);
            x.items("set", ["x", "y"], |x, v| {
                x.leaf("v", v);
            });
        });
        assert_eq!(
            x.finish(),
            "<a><b>1 &lt; 2 &amp; &apos;q&apos;</b><set><item><v>x</v></item><item><v>y</v></item></set></a>"
        );
    }
}
