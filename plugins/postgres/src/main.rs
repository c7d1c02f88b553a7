//! The `postgres` plugin binary: serves [`PostgresPlugin`] on stdin/stdout.

use orrery_plugin_postgres::PostgresPlugin;

fn main() {
    orrery_plugin_sdk::serve(PostgresPlugin::default())
}
