//! The cuts of the built kernel modules: for every entry of a module that `cargo xtask ptx` built
//! (with and without `--nvshmem`), the text `prune_to_entry` gives the JIT defines each function
//! that its code names, and no function that nothing in it names. `ptx_prune`'s unit tests read
//! hand-written modules; this test reads what LLVM emits, so that a change in its PTX's shape
//! fails here rather than in a GPU's JIT (a missing function) or as a slow load (functions kept
//! that the entry never calls, as before session 30's fix).
//!
//! It reads the PTX with a parser of its own, simpler than `ptx_prune`'s: a check that reused
//! the parser it checks could not catch that parser's misreadings.
//!
//! It needs the built modules, so it is ignored by default; `.ci/run` runs it after its PTX build:
//! `MGWS_BUILT_PTX=a.ptx:b.ptx cargo test -p mgws --release --test built_kernel_cuts -- --ignored`.
#![cfg(feature = "cuda")]

use std::collections::HashSet;

use mgws::cuda::ptx::prune_to_entry;

/// The code of a line: what precedes its `//` comment.
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

/// The identifiers of `text`'s code.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.lines().flat_map(|l| {
        code(l)
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .filter(|w| !w.is_empty())
    })
}

/// The names of the entries of `ptx`.
fn entries(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| {
            let line = code(l).trim_start();
            let rest = line.strip_prefix(".visible ").unwrap_or(line);
            let rest = rest.strip_prefix(".entry")?;
            rest.trim_start().split('(').next().map(str::trim)
        })
        .collect()
}

/// The functions `ptx` defines (a `.func` header followed by a body, not a declaration ending in
/// `;`): each name with the index of its header line.
fn defined_functions(ptx: &str) -> Vec<(&str, usize)> {
    let lines: Vec<&str> = ptx.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut header = code(lines[i]).trim_start();
        while let Some(rest) = header
            .strip_prefix(".visible ")
            .or_else(|| header.strip_prefix(".weak "))
        {
            header = rest.trim_start();
        }
        let Some(mut rest) = header.strip_prefix(".func") else {
            i += 1;
            continue;
        };
        rest = rest.trim_start();
        if rest.starts_with('(') {
            // The return parameter: the name follows its closing parenthesis.
            rest = rest
                .split_once(')')
                .map_or("", |(_, after)| after)
                .trim_start();
        }
        let name = rest.split('(').next().unwrap_or("").trim();
        // The parameter list closes on this line or a later one; a body's `{` follows it.
        let mut depth = 0i32;
        let mut j = i;
        let mut body = false;
        'scan: while j < lines.len() {
            for c in code(lines[j]).chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    ';' if depth == 0 => break 'scan,
                    '{' if depth == 0 => {
                        body = true;
                        break 'scan;
                    }
                    _ => {}
                }
            }
            j += 1;
        }
        if body && !name.is_empty() {
            found.push((name, i));
        }
        i = j + 1;
    }
    found
}

/// What is wrong with `cut`, the text of `entry` cut from a module that defines `module_funcs`:
/// functions its code names that it does not define, and functions it defines that nothing else
/// in it names.
fn faults(cut: &str, entry: &str, module_funcs: &HashSet<&str>) -> Vec<String> {
    let mut faults = Vec::new();
    if entries(cut) != [entry] {
        faults.push(format!(
            "{entry}: the cut holds the entries {:?}",
            entries(cut)
        ));
    }
    let lines: Vec<&str> = cut.lines().collect();
    let defined = defined_functions(cut);
    let headers: HashSet<usize> = defined.iter().map(|&(_, i)| i).collect();
    let defined: HashSet<&str> = defined.iter().map(|&(n, _)| n).collect();
    // Names read outside the functions' own header lines: calls, addresses taken.
    let named: HashSet<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| !headers.contains(i))
        .flat_map(|(_, l)| identifiers(l))
        .filter(|w| module_funcs.contains(w))
        .collect();
    for f in named.difference(&defined) {
        faults.push(format!(
            "{entry}: names `{f}`, which the cut does not define"
        ));
    }
    for f in defined.difference(&named) {
        faults.push(format!(
            "{entry}: defines `{f}`, which nothing in the cut names"
        ));
    }
    faults
}

#[test]
#[ignore = "needs the modules `cargo xtask ptx` builds; .ci/run runs it after its PTX build"]
fn every_entry_of_the_built_modules_is_cut_to_the_functions_it_names() {
    let paths = std::env::var("MGWS_BUILT_PTX")
        .expect("MGWS_BUILT_PTX names the built modules, separated by `:`");
    for path in paths.split(':').filter(|p| !p.is_empty()) {
        let ptx = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let names = entries(&ptx);
        assert!(!names.is_empty(), "{path} has no entries");
        let module_funcs: HashSet<&str> = defined_functions(&ptx)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = names.len().div_ceil(threads);
        let faults: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = names
                .chunks(chunk)
                .map(|entries| {
                    let (ptx, module_funcs) = (&ptx, &module_funcs);
                    s.spawn(move || {
                        entries
                            .iter()
                            .flat_map(|e| {
                                let cut = prune_to_entry(ptx, e).expect("the module has the entry");
                                faults(&cut, e, module_funcs)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        assert!(faults.is_empty(), "{path}:\n{}", faults.join("\n"));
        println!(
            "{path}: {} entries cut, {} functions defined, every cut closed and minimal",
            names.len(),
            module_funcs.len()
        );
    }
}

#[test]
fn the_check_finds_a_missing_and_an_extra_function() {
    // A cut that lost a function its entry calls, and kept one nothing calls: both are faults.
    let module = "\
.visible .func f(
)
{
\tret;
}
.visible .func g(
)
{
\tret;
}
.visible .entry e(
)
{
\tcall.uni f, ();
\tret;
}
";
    let funcs: HashSet<&str> = defined_functions(module)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(funcs, HashSet::from(["f", "g"]));
    let cut = prune_to_entry(module, "e").unwrap();
    assert!(faults(&cut, "e", &funcs).is_empty(), "{cut}");
    let missing = cut.replace(".visible .func f(\n)\n{\n\tret;\n}\n", "");
    assert_eq!(
        faults(&missing, "e", &funcs),
        ["e: names `f`, which the cut does not define"]
    );
    let extra = format!("{cut}.visible .func g(\n)\n{{\n\tret;\n}}\n");
    assert_eq!(
        faults(&extra, "e", &funcs),
        ["e: defines `g`, which nothing in the cut names"]
    );
}
