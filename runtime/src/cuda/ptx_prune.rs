//! A PTX module pruned to one kernel entry and the functions it reaches ([`prune_to_entry`]), so
//! that the driver's JIT compiles what a run launches and nothing else.
//!
//! The built-in module holds hundreds of entries and, since the bridged entries call their
//! loops out of line, over a hundred `.func` definitions, most of them large. The JIT compiles
//! every function of the text it is given, called or not: linked with NVSHMEM's device code
//! (the device-API transport) one entry with all of them took minutes (docs/results.md).

use std::collections::{HashMap, HashSet};

/// One top-level part of a module, in the module's order.
enum Part<'a> {
    /// Lines outside every function and entry: the header, globals, comments.
    Lines(&'a str),
    /// A kernel entry, with its name.
    Entry(&'a str, &'a str),
    /// A `.func` declaration or definition: its name where the header line names it, its text,
    /// and whether it is an `.extern` declaration (NVSHMEM's wrappers, resolved by the linker).
    Func(Option<&'a str>, &'a str, bool),
}

/// The part of `ptx` the driver needs to JIT-compile `entry` alone: the lines outside functions
/// and entries (header directives, globals), the entry, every `.func` it reaches through its
/// calls (or any other mention, and those of the globals) with their declarations, and the
/// `.extern` declarations; the module's order is kept. `None` if `ptx` has no `.entry entry`.
pub fn prune_to_entry(ptx: &str, entry: &str) -> Option<String> {
    let parts = parts_of(ptx);
    let entry_text = parts.iter().find_map(|p| match p {
        Part::Entry(name, text) if *name == entry => Some(*text),
        _ => None,
    })?;
    let definitions: HashMap<&str, &str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Func(Some(name), text, false) if text.contains('{') => Some((*name, *text)),
            _ => None,
        })
        .collect();
    // The functions reached from the entry and the globals, transitively.
    let globals = parts.iter().filter_map(|p| match p {
        Part::Lines(text) => Some(*text),
        _ => None,
    });
    let reached = reached_from(core::iter::once(entry_text).chain(globals), &definitions);
    let mut out = String::with_capacity(entry_text.len() * 2);
    for p in &parts {
        match p {
            Part::Lines(text) => out.push_str(text),
            Part::Entry(name, text) if *name == entry => out.push_str(text),
            Part::Entry(..) => {}
            Part::Func(name, text, external) => {
                // A function whose name the parser missed is kept: dropping it could break
                // the entry, keeping it only costs JIT time.
                if *external || name.is_none_or(|n| reached.contains(n)) {
                    out.push_str(text);
                }
            }
        }
    }
    Some(out)
}

/// The names of `definitions` that `texts` mention, and those their definitions mention, and so
/// on.
fn reached_from<'a>(
    texts: impl Iterator<Item = &'a str>,
    definitions: &HashMap<&'a str, &'a str>,
) -> HashSet<&'a str> {
    let mut reached = HashSet::new();
    let mut pending: Vec<&str> = texts.collect();
    while let Some(text) = pending.pop() {
        for token in identifiers(text) {
            if let Some((&name, &definition)) = definitions.get_key_value(token) {
                if reached.insert(name) {
                    pending.push(definition);
                }
            }
        }
    }
    reached
}

/// The module's top-level parts. A function or entry runs from its header line to the line
/// that closes its body, or, for a declaration, to the `;` after its parameter list.
fn parts_of(ptx: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    // Byte offsets: where the current run of outside lines began, where the open part began.
    let mut lines_from = 0;
    let mut open: Option<(usize, Header<'_>)> = None;
    let (mut parens, mut braces, mut opened) = (0i32, 0i32, false);
    let mut at = 0;
    for line in ptx.split_inclusive('\n') {
        let start = at;
        at += line.len();
        if open.is_none() {
            let Some(header) = header_of(line) else {
                continue;
            };
            if lines_from < start {
                parts.push(Part::Lines(&ptx[lines_from..start]));
            }
            open = Some((start, header));
            (parens, braces, opened) = (0, 0, false);
        }
        let code = line.split("//").next().unwrap_or("");
        for c in code.bytes() {
            match c {
                b'(' => parens += 1,
                b')' => parens -= 1,
                b'{' => {
                    braces += 1;
                    opened = true;
                }
                b'}' => braces -= 1,
                _ => {}
            }
        }
        let closed = if opened {
            braces == 0
        } else {
            parens == 0 && code.trim_end().ends_with(';')
        };
        if closed {
            let (from, header) = open.take().expect("a part is open");
            let text = &ptx[from..at];
            parts.push(match header {
                Header::Entry(name) => Part::Entry(name, text),
                Header::Func(name, external) => Part::Func(name, text, external),
            });
            lines_from = at;
        }
    }
    // An unclosed part (a truncated module) and trailing lines stay as they are.
    let rest = open.map_or(lines_from, |(from, _)| from);
    if rest < ptx.len() {
        parts.push(Part::Lines(&ptx[rest..]));
    }
    parts
}

/// What a header line opens.
enum Header<'a> {
    Entry(&'a str),
    /// A function's name (if the line gives it) and whether it is `.extern`.
    Func(Option<&'a str>, bool),
}

/// The part `line` opens, if it is the header line of an entry or a function.
fn header_of(line: &str) -> Option<Header<'_>> {
    if let Some(name) = entry_name(line) {
        return Some(Header::Entry(name));
    }
    let mut code = line.trim_start();
    let mut external = false;
    loop {
        if let Some(rest) = code.strip_prefix(".visible").or(code.strip_prefix(".weak")) {
            code = rest.trim_start();
        } else if let Some(rest) = code.strip_prefix(".extern") {
            external = true;
            code = rest.trim_start();
        } else {
            break;
        }
    }
    let rest = code.strip_prefix(".func")?;
    if !rest.starts_with(char::is_whitespace) && !rest.starts_with('(') {
        return None;
    }
    let mut rest = rest.trim_start();
    // The return parameter, `(.param .b32 func_retval0)`, comes before the name.
    if rest.starts_with('(') {
        rest = rest.split_once(')').map_or("", |(_, r)| r).trim_start();
    }
    let name = identifiers(rest).next();
    Some(Header::Func(name, external))
}

/// The name a `.entry NAME(` declaration line declares.
fn entry_name(line: &str) -> Option<&str> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return None;
    }
    let rest = code.split_once(".entry ")?.1.trim_start();
    rest.split(|c: char| c == '(' || c.is_whitespace())
        .next()
        .filter(|n| !n.is_empty())
}

/// The identifier-like tokens of `text`, in order: runs of letters, digits, `_` and `$`.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two entries, each calling a function of its own: `a` calls `f`, which calls `g`; `b`
    /// calls `h`; `unused` is declared and defined and called by none; a global points at
    /// `pointed`; NVSHMEM's wrapper is an `.extern` declaration.
    const PTX: &str = "\
.version 8.7
.target sm_90
.address_size 64

.extern .func mgws_nvshmem_add
(
\t.param .b64 mgws_nvshmem_add_param_0
)
;
.func  (.param .b32 func_retval0) f
(
\t.param .b64 f_param_0
)
;
.func g(
\t.param .b64 g_param_0
)
;
.func h
(
\t.param .b64 h_param_0
)
;
.func unused
(
\t.param .b64 unused_param_0
)
;
.func pointed()
;
.global .align 8 .u64 mgws_fib_fingerprint = 1;
.global .align 8 .u64 table[1] = {pointed};
\t// .globl\tmgws_a
.visible .entry mgws_a(
\t.param .u64 a
)
.maxntid 32
{
\t{ // inner scope
\tcall.uni (retval0), f, (param0);
\t}
}
\t// .globl\tmgws_b
.visible .entry mgws_b(
\t.param .u64 b
)
{
\tcall.uni h, (param0);
\tret;
}
.func  (.param .b32 func_retval0) f(
\t.param .b64 f_param_0
)
{
\tcall.uni g, (param0);
\tret;
}
.func g(
\t.param .b64 g_param_0
)
{
\tret;
}
.func h(
\t.param .b64 h_param_0
)
{
\tcall.uni mgws_nvshmem_add, (param0);
\tret;
}
.func unused(
\t.param .b64 unused_param_0
)
{ // never called
\tret;
}
.func pointed()
{
\tret;
}
";

    /// How many times `text` declares or defines the function `name`.
    fn funcs_named(text: &str, name: &str) -> usize {
        text.lines()
            .filter(|l| matches!(header_of(l), Some(Header::Func(Some(n), _)) if n == name))
            .count()
    }

    #[test]
    fn pruning_keeps_one_entry_and_the_functions_it_reaches() {
        let a = prune_to_entry(PTX, "mgws_a").unwrap();
        assert!(a.starts_with(".version 8.7\n.target sm_90\n"), "{a}");
        assert!(
            a.contains(".entry mgws_a(") && a.contains("// inner scope"),
            "{a}"
        );
        assert!(
            !a.contains(".entry mgws_b") && !a.contains(".param .u64 b"),
            "{a}"
        );
        // f and g (through f), each declared and defined; h and unused not at all.
        for (name, count) in [("f", 2), ("g", 2), ("h", 0), ("unused", 0)] {
            assert_eq!(funcs_named(&a, name), count, "{name}:\n{a}");
        }
        // What the globals name, the globals and the extern declarations stay.
        assert_eq!(funcs_named(&a, "pointed"), 2, "{a}");
        assert!(a.contains("table[1] = {pointed};") && a.contains("mgws_fib_fingerprint"));
        assert_eq!(funcs_named(&a, "mgws_nvshmem_add"), 1, "{a}");
        assert!(!a.contains("never called"), "{a}");

        let b = prune_to_entry(PTX, "mgws_b").unwrap();
        assert!(
            b.contains(".entry mgws_b(") && !b.contains(".entry mgws_a"),
            "{b}"
        );
        for (name, count) in [("f", 0), ("g", 0), ("h", 2), ("unused", 0), ("pointed", 2)] {
            assert_eq!(funcs_named(&b, name), count, "{name}:\n{b}");
        }
        assert!(b.ends_with(".func pointed()\n{\n\tret;\n}\n"), "{b}");
        assert_eq!(prune_to_entry(PTX, "mgws_c"), None);
    }

    /// The parts' texts one after the other.
    fn joined(parts: &[Part<'_>]) -> String {
        parts
            .iter()
            .map(|p| match p {
                Part::Lines(t) | Part::Entry(_, t) | Part::Func(_, t, _) => *t,
            })
            .collect()
    }

    #[test]
    fn every_line_of_the_module_is_in_one_part_in_order() {
        assert_eq!(joined(&parts_of(PTX)), PTX);
        // A module cut inside a function keeps the cut part as plain lines.
        let cut = &PTX[..PTX.find("\tcall.uni g").unwrap()];
        let parts = parts_of(cut);
        assert_eq!(joined(&parts), cut);
        assert!(matches!(parts.last(), Some(Part::Lines(t)) if t.starts_with(".func")));
    }

    #[test]
    fn function_headers_name_their_function_after_the_return_parameter() {
        for (line, name, external) in [
            (".func  (.param .b32 func_retval0) f(\n", "f", false),
            (".func g\n", "g", false),
            (".visible .func h(", "h", false),
            (".weak .func $w(", "$w", false),
            (
                ".extern .func  (.param .b64 func_retval0) mgws_nvshmem_get\n",
                "mgws_nvshmem_get",
                true,
            ),
        ] {
            match header_of(line) {
                Some(Header::Func(Some(n), e)) => assert_eq!((n, e), (name, external), "{line}"),
                _ => panic!("{line:?} is not read as a function header"),
            }
        }
        for line in [
            "\t// .func f(",
            ".funcs",
            ".global .u64 x;",
            "\tcall.uni f, (p);",
        ] {
            assert!(header_of(line).is_none(), "{line:?}");
        }
    }
}
