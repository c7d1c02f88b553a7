//! What the IAM types share: tags in IAM's shape, and the tag and untag
//! calls each IAM resource has under its own name.

use aws_sdk_iam::types::Tag;
use orrery_plugin_sdk::PluginError;

use crate::error::build_error;
use crate::tags::{self, Tags};

/// `tags` as IAM takes them.
pub fn to_iam(what: &str, tags: Option<&Tags>) -> Result<Option<Vec<Tag>>, PluginError> {
    let Some(tags) = tags.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
        .map_err(|e| build_error(what, e))
}

/// IAM's tags as `tags`.
pub fn from_iam(tags: &[Tag]) -> Option<Tags> {
    tags::read(
        tags.iter()
            .map(|t| (t.key().to_owned(), t.value().to_owned())),
    )
}

/// Sends the tag and untag calls that bring `current` to `desired`:
/// `$client.$tag().$id(id).set_tags(..)` and `$untag` alike.
macro_rules! retag {
    ($c:expr, $what:expr, $current:expr, $desired:expr, $tag:ident, $untag:ident, $id_setter:ident, $id:expr) => {{
        let (set, remove) = crate::tags::diff($current, $desired);
        if !remove.is_empty() {
            $c.iam
                .$untag()
                .$id_setter($id)
                .set_tag_keys(Some(remove))
                .send()
                .await
                .map_err(|e| crate::error::from_sdk($what, e))?;
        }
        if !set.is_empty() {
            $c.iam
                .$tag()
                .$id_setter($id)
                .set_tags(crate::iam::to_iam($what, Some(&set))?)
                .send()
                .await
                .map_err(|e| crate::error::from_sdk($what, e))?;
        }
    }};
}
pub(crate) use retag;
