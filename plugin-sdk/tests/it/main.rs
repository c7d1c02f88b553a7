//! The SDK's integration tests, one binary (issue 41): the plugin side of
//! the link driven with raw frames, and answers held to the size the host
//! accepts.

mod link;
mod reply_size;
