use orrery_plugin_jetstream::JetstreamPlugin;

// Plugins allocate for every message they decode and answer: mimalloc's
// per-thread free lists cost a fraction of glibc's arenas (BENCHMARKS.md,
// relay round 9).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    orrery_plugin_sdk::serve(JetstreamPlugin::default())
}
