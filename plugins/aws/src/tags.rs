//! Tags, a map in every type, and the changes that bring AWS's to it.

use std::collections::BTreeMap;

/// A type's `tags`.
pub type Tags = BTreeMap<String, String>;

/// `None` for no tags, so an untagged resource reads as one written
/// without `tags`.
pub fn read(pairs: impl IntoIterator<Item = (String, String)>) -> Option<Tags> {
    let tags: Tags = pairs.into_iter().collect();
    (!tags.is_empty()).then_some(tags)
}

/// What to set and which keys to remove to go from `current` to
/// `desired` (absent: no tags).
pub fn diff(current: Option<&Tags>, desired: Option<&Tags>) -> (Tags, Vec<String>) {
    let empty = Tags::new();
    let (current, desired) = (current.unwrap_or(&empty), desired.unwrap_or(&empty));
    let set = desired
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let remove = current
        .keys()
        .filter(|k| !desired.contains_key(*k))
        .cloned()
        .collect();
    (set, remove)
}
