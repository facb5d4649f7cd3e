//! Builds this crate's own library as the GPU kernel (nvptx64 PTX) into `$OUT_DIR`, where
//! `mgws::kernel_ptx!()` embeds it. Without a nightly toolchain, or with `MGWS_SKIP_KERNEL=1`, the
//! PTX is a placeholder naming the reason, and the CPU backend still works. Only the kernel's
//! inputs rerun this script: editing `src/main.rs` does not rebuild the kernel.
fn main() {
    mgws_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_script();
}
