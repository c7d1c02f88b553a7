//! Catalog rows as the types' own structs: a query names its columns as
//! the struct's fields (`rolcanlogin AS login`) and [`record`] fills the
//! struct by name, so no type maps columns by position. A NULL column is
//! an absent field.

use orrery_plugin_sdk::PluginError;
use serde::de::value::{Error, MapDeserializer, SeqDeserializer};
use serde::de::{DeserializeOwned, IntoDeserializer, Visitor};
use serde::{forward_to_deserialize_any, Deserializer};
use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Row};

/// The one row of `sql` (parameters `params`), or `NotFound`
/// "`what``missing`" (`missing`: " does not exist") when there is none.
pub async fn one(
    client: &impl GenericClient,
    (what, missing): (&str, &str),
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Row, PluginError> {
    let row = client
        .query_opt(sql, params)
        .await
        .map_err(|e| crate::error::pg(what, &e))?;
    row.ok_or_else(|| PluginError::not_found(format!("{what}{missing}")))
}

/// Runs the statements `sql` through `client` (a connection or a
/// transaction); failures name `what`.
pub async fn execute(
    client: &impl GenericClient,
    what: &str,
    sql: &str,
) -> Result<(), PluginError> {
    client
        .batch_execute(sql)
        .await
        .map_err(|e| crate::error::pg(what, &e))
}

/// `row` as a `T` whose fields are named as the row's columns.
pub fn record<T: DeserializeOwned>(row: &Row) -> Result<T, PluginError> {
    record_of(row, row.len())
}

/// The first `n` columns of `row` as a `T` (see [`record`]).
pub fn record_of<T: DeserializeOwned>(row: &Row, n: usize) -> Result<T, PluginError> {
    let mut cells = Vec::with_capacity(n);
    for (i, column) in row.columns().iter().enumerate().take(n) {
        let cell = match *column.type_() {
            Type::BOOL => row.get::<_, Option<bool>>(i).map(Cell::Bool),
            Type::INT4 => row.get::<_, Option<i32>>(i).map(Cell::Int),
            Type::TEXT | Type::NAME | Type::VARCHAR => {
                row.get::<_, Option<String>>(i).map(Cell::Text)
            }
            Type::TEXT_ARRAY | Type::NAME_ARRAY => {
                row.get::<_, Option<Vec<String>>>(i).map(Cell::Texts)
            }
            ref other => {
                return Err(PluginError::new(
                    orrery_plugin_sdk::schema::ErrorCode::GeneralServiceException,
                    format!("catalog column `{}` is a {other}", column.name()),
                ))
            }
        };
        if let Some(cell) = cell {
            cells.push((column.name(), cell));
        }
    }
    T::deserialize(MapDeserializer::new(cells.into_iter())).map_err(|e| {
        PluginError::new(
            orrery_plugin_sdk::schema::ErrorCode::GeneralServiceException,
            format!("reading the catalogs: {e}"),
        )
    })
}

/// One non-NULL column's value.
enum Cell {
    Bool(bool),
    Int(i32),
    Text(String),
    Texts(Vec<String>),
}

impl<'de> IntoDeserializer<'de, Error> for Cell {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for Cell {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Cell::Bool(b) => visitor.visit_bool(b),
            Cell::Int(n) => visitor.visit_i32(n),
            Cell::Text(s) => visitor.visit_string(s),
            Cell::Texts(l) => visitor.visit_seq(SeqDeserializer::new(l.into_iter())),
        }
    }

    /// A cell is never NULL (those are left out), so an `Option` is `Some`.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple tuple_struct
        map struct enum identifier ignored_any
    }
}
