//! [`Allocator`]: mimalloc, as Orrery's own plugins and satellites use it.
//!
//! A plugin allocates for every message it decodes and answers, and frees
//! much of it on another task: mimalloc's per-thread free lists cost a
//! fraction of glibc's arenas there (BENCHMARKS.md, relay round 9). This
//! differs from the `mimalloc` crate's allocator in one way: an allocation
//! whose alignment is no more than a machine word (nearly all of them) is
//! a plain `mi_malloc`. Asked for an aligned block, mimalloc takes its
//! over-allocating slow path for anything larger than 1 KiB, even at the
//! word alignment every block has anyway: about 800 instructions for each
//! request's kilobytes-long future (BENCHMARKS.md, relay round 12).
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: orrery_plugin_sdk::Allocator = orrery_plugin_sdk::Allocator;
//! ```

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// Every block mimalloc returns is aligned to a machine word at least
/// (its size classes are whole words).
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as a global allocator (feature `mimalloc`); see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allocator;

// SAFETY: every pointer returned comes from mimalloc, aligned as `layout`
// asks (plain calls only where a word's alignment is enough), and is given
// back to mimalloc, which frees aligned and unaligned blocks alike.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's allocation functions take any size.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`'s alignment.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

/// A block for `layout` from `plain` where a word's alignment is enough,
/// else from `aligned`.
#[inline]
unsafe fn allocate(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: both take any size (and `aligned` any power-of-two alignment,
    // which a `Layout`'s is).
    unsafe {
        if layout.align() <= WORD {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every size class and alignment come back aligned, hold
    /// what was written, keep it across a reallocation and are freed.
    #[test]
    fn blocks_are_aligned_as_asked_and_keep_their_bytes() {
        let a = Allocator;
        for align in [1, 2, 4, 8, 16, 64, 4096] {
            for size in [1, 7, 8, 24, 100, 1024, 1025, 3560, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; every block is freed with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    std::ptr::write_bytes(p, 0xA5, size);
                    let grown = a.realloc(p, layout, size * 2);
                    assert_eq!(grown as usize % align, 0, "grown {size} align {align}");
                    assert!((0..size).all(|i| *grown.add(i) == 0xA5));
                    a.dealloc(grown, Layout::from_size_align(size * 2, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
