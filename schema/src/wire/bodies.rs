//! Direct readers of the operation requests and their answer, field by
//! field as serde's derive reads them: missing fields keep the struct's
//! default, a field given twice is left to serde (which refuses it).

use super::Reader;
use crate::error_code::ErrorCode;
use crate::progress::{Operation, OperationStatus, ProgressEvent};
use crate::request::{
    CreateRequest, DeleteRequest, ReadRequest, StatusRequest, Target, UpdateRequest,
};
use crate::value::{PropertyMap, Value};

/// A message with a direct reader: `None` leaves the input to serde.
pub(crate) trait Direct: Sized {
    fn read(r: &mut Reader<'_>) -> Option<Self>;
}

/// How each field type is read.
trait Field: Sized {
    fn read_field(r: &mut Reader<'_>) -> Option<Self>;
}

impl Field for String {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.string()
    }
}

impl Field for u64 {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.uint()
    }
}

impl Field for PropertyMap {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.property_map()
    }
}

impl Field for Value {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.value(super::MAX_VALUE_DEPTH)
    }
}

impl Field for Target {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        Target::read(r)
    }
}

impl<T: Field> Field for Option<T> {
    fn read_field(r: &mut Reader<'_>) -> Option<Self> {
        r.option(T::read_field)
    }
}

macro_rules! open_enum_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn read_field(r: &mut Reader<'_>) -> Option<Self> {
                r.text().map(<$t>::from_wire)
            }
        }
    )*};
}

open_enum_field!(Operation, OperationStatus, ErrorCode);

/// A direct reader for a struct of `Field`s (at most 16).
macro_rules! direct {
    ($t:ident { $($field:ident),+ $(,)? }) => {
        impl Direct for $t {
            fn read(r: &mut Reader<'_>) -> Option<Self> {
                let mut out = $t::default();
                // Names every field: a field added to the struct and not
                // here fails to compile instead of being skipped.
                let $t { $($field: _),+ } = &out;
                let mut seen = 0u16;
                for _ in 0..r.map_len()? {
                    let mut bit = 1u16;
                    let key = r.str()?;
                    $(
                        if key == stringify!($field).as_bytes() {
                            if seen & bit != 0 {
                                return None;
                            }
                            seen |= bit;
                            out.$field = Field::read_field(r)?;
                            continue;
                        }
                        bit <<= 1;
                    )+
                    let _ = bit;
                    r.skip_scalar()?;
                }
                Some(out)
            }
        }
    };
}

direct!(Target { name, config });
direct!(CreateRequest {
    request_id,
    resource_type,
    label,
    target,
    properties
});
direct!(ReadRequest {
    request_id,
    resource_type,
    target,
    native_id,
    properties
});
direct!(UpdateRequest {
    request_id,
    resource_type,
    label,
    target,
    native_id,
    prior_properties,
    properties
});
direct!(DeleteRequest {
    request_id,
    resource_type,
    target,
    native_id,
    properties
});
direct!(StatusRequest {
    request_id,
    operation,
    resource_type,
    target,
    native_id,
    context
});
direct!(ProgressEvent {
    operation,
    status,
    request_id,
    resource_type,
    native_id,
    properties,
    error_code,
    message,
    retry_after_ms,
    context
});
