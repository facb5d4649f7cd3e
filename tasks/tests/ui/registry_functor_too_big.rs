use mgws_tasks::{Ctx, TaskError, TaskFunctor, TaskStruct};

// Written without `#[task]`: the registry checks the size too.
#[derive(Clone, Copy, mgws_tasks::Pod, mgws_tasks::Zeroable)]
#[repr(C)]
struct Big {
    values: [u64; 5],
}

impl TaskFunctor for Big {
    fn run(&self, _: &TaskStruct, _: &mut impl Ctx) -> Result<(), TaskError> {
        Ok(())
    }
}

#[mgws_tasks::registry]
enum Tasks {
    Big(Big),
}

fn main() {}
