//! JSON Merge Patch (RFC 7386), used to derive invalid provider specs from a valid one.

use serde_json::Value;

/// Applies `patch` to `target` as RFC 7386 describes: objects merge recursively,
/// `null` removes a member, any other value replaces the target.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(target_members) = target {
        for (key, value) in patch_members {
            if value.is_null() {
                target_members.remove(key);
            } else {
                merge_patch(target_members.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn patched(target: Value, patch: Value) -> Value {
        let mut t = target;
        merge_patch(&mut t, &patch);
        t
    }

    #[test]
    fn rfc7386_examples() {
        // The test cases of RFC 7386, appendix A (a selection).
        assert_eq!(patched(json!({"a": "b"}), json!({"a": "c"})), json!({"a": "c"}));
        assert_eq!(patched(json!({"a": "b"}), json!({"b": "c"})), json!({"a": "b", "b": "c"}));
        assert_eq!(patched(json!({"a": "b"}), json!({"a": null})), json!({}));
        assert_eq!(patched(json!({"a": "b", "b": "c"}), json!({"a": null})), json!({"b": "c"}));
        assert_eq!(patched(json!({"a": ["b"]}), json!({"a": "c"})), json!({"a": "c"}));
        assert_eq!(patched(json!({"a": "c"}), json!({"a": ["b"]})), json!({"a": ["b"]}));
        assert_eq!(patched(json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}})), json!({"a": {"b": "d"}}));
        assert_eq!(patched(json!({"a": [{"b": "c"}]}), json!({"a": [1]})), json!({"a": [1]}));
        assert_eq!(patched(json!(["a", "b"]), json!(["c", "d"])), json!(["c", "d"]));
        assert_eq!(patched(json!({"a": "b"}), json!(["c"])), json!(["c"]));
        assert_eq!(patched(json!({"e": null}), json!({"a": 1})), json!({"e": null, "a": 1}));
        assert_eq!(patched(json!([1, 2]), json!({"a": "b", "c": null})), json!({"a": "b"}));
        assert_eq!(patched(json!({}), json!({"a": {"bb": {"ccc": null}}})), json!({"a": {"bb": {}}}));
    }
}
