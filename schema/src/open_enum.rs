//! The `open_enum!` macro: string-valued enums that a newer peer may extend.
//!
//! Every enum on the wire is written as its string name. A value this release
//! does not know decodes into `Unknown(String)` and is written back verbatim,
//! so a relay in the middle never loses information and a decoder never fails
//! because a peer is newer.

/// Declares an enum whose variants travel as fixed strings, plus an
/// `Unknown(String)` catch-all. Mark the default variant with `[default]`
/// after its wire name and derive `Default` on the enum. The doc comment of each variant is also the
/// description printed in `docs/protocol.md`.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $variant:ident = $wire:literal $([$default:ident])?,
            )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $(
                $(#[doc = $doc])*
                $(#[$default])?
                $variant,
            )+
            /// A value this release does not know, kept verbatim so that it
            /// survives decoding and re-encoding.
            Unknown(String),
        }

        impl $name {
            /// Every value this release knows, with its wire name and description.
            pub const VARIANTS: &'static [(&'static str, &'static str)] = &[
                $( ($wire, concat!($($doc),*)), )+
            ];

            /// The string written on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )+
                    Self::Unknown(other) => other.as_str(),
                }
            }

            /// The string written on the wire, borrowed for as long as the
            /// program runs: `None` for a value this release does not know.
            pub fn known_str(&self) -> Option<&'static str> {
                match self {
                    $( Self::$variant => Some($wire), )+
                    Self::Unknown(_) => None,
                }
            }

            /// Parses a wire name; unknown names become `Unknown`.
            pub fn from_wire(name: &str) -> Self {
                match name {
                    $( $wire => Self::$variant, )+
                    other => Self::Unknown(other.to_owned()),
                }
            }

            /// Whether this release knows the value.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(Self::from_wire(s))
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> ::serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " name"))
                    }
                    fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        Ok($name::from_wire(v))
                    }
                    fn visit_bytes<E: ::serde::de::Error>(self, v: &[u8]) -> Result<$name, E> {
                        ::std::str::from_utf8(v)
                            .map($name::from_wire)
                            .map_err(|_| E::invalid_value(::serde::de::Unexpected::Bytes(v), &self))
                    }
                }
                d.deserialize_str(V)
            }
        }
    };
}

pub(crate) use open_enum;
