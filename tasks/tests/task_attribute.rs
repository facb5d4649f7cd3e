//! The compile-time errors of `#[task]`, `#[registry]`'s result tables and typed accumulation:
//! each names what is wrong and how to fix it.

#[test]
fn task_attribute_errors_and_passes() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/task_with_own_derives.rs");
    t.compile_fail("tests/ui/task_too_big.rs");
    t.compile_fail("tests/ui/task_generic.rs");
    t.compile_fail("tests/ui/task_packed.rs");
    t.compile_fail("tests/ui/registry_functor_too_big.rs");
    t.compile_fail("tests/ui/accumulate_wrong_type.rs");
    t.compile_fail("tests/ui/registry_arguments.rs");
}
