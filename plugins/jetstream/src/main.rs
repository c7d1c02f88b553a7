use orrery_plugin_jetstream::JetstreamPlugin;

fn main() {
    orrery_plugin_sdk::serve(JetstreamPlugin::default())
}
