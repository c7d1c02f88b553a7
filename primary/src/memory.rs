//! Giving memory back after a command.
//!
//! A 100,000-resource command peaks at about 2.4 GiB and frees nearly all
//! of it when it ends, but glibc keeps freed pages in its per-thread arenas
//! for the next allocation: five such commands left a serving primary at
//! 2 GiB while idle (primary/benches/idle_memory.sh). `malloc_trim` hands
//! the free pages of every arena back to the kernel.

/// Returns the allocator's free memory to the operating system. It walks
/// every arena, so it runs once per finished command, off the async
/// workers; elsewhere than Linux with glibc it does nothing.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases glibc's own free pages; it takes
    // no pointer and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
