//! The `orrery` binary's integration tests, one binary (issue 41): each
//! module was a test binary of its own. `common` runs `orrery` in a scratch
//! directory, starts servers, satellites and fleets; `chaos` holds the
//! chaos soak's parts.

mod auth;
mod chaos;
mod chaos_soak;
mod command_events;
mod common;
mod config_file;
mod crash_resume;
mod dashboard_browser;
mod dashboard_tls;
mod dependency_edges;
mod discovery;
mod discovery_parents;
mod distributed;
mod edge_kinds;
mod embedded;
mod example_platform;
mod extract;
mod held_targets;
mod http_api;
mod invalid_stacks;
mod message_sizes;
mod multi_site_example;
mod observability;
mod paced;
mod paged_listing;
mod plan_values;
mod plugin_new;
mod plugin_test;
mod postgres_apply;
mod postgres_plugin;
mod progress;
mod remote_cli;
mod satellite_loss;
mod schema;
mod secrets_at_rest;
mod server_background;
mod server_resume;
mod stack_instances;
mod stack_modules;
mod stack_moved;
mod stack_options;
mod stack_outputs;
mod stack_parameters;
mod stack_references;
mod targeted;
mod throttled;
mod trust_authorize;
mod trust_events;
mod trust_login;
mod trust_mtls;
mod trust_outputs;
mod validate;
mod yaml_limits;
