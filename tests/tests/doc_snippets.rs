//! Every code snippet in README.md and docs/ is code that compiles: README.md and
//! docs/embedding.md run as doctests of the `mgws` crate, and every other snippet says which file
//! it is an excerpt of (`<!-- excerpt: PATH -->` on the line before it), whose lines it must show
//! in order (whitespace and trailing commas aside; `...` and `/* ... */` elide, trailing comments
//! are the doc's own).

use std::path::{Path, PathBuf};

/// Snippets that are doctests: these files are included into the `mgws` crate's documentation.
const DOCTESTED: [&str; 2] = ["README.md", "docs/embedding.md"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `(line number, info string, the line before the fence, the lines)` of every fenced block.
fn blocks(text: &str) -> Vec<(usize, String, String, Vec<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let start = i;
            let before = if i > 0 {
                lines[i - 1].trim().to_string()
            } else {
                String::new()
            };
            i += 1;
            let mut body = Vec::new();
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(lines[i].to_string());
                i += 1;
            }
            out.push((start + 1, info.trim().to_string(), before, body));
        }
        i += 1;
    }
    out
}

/// The line without its whitespace and its trailing comment (`//` in Rust, `#` in TOML).
fn normalized(line: &str, comment: &str) -> String {
    let code = match line.find(comment) {
        // `#!`/`#[` in Rust are attributes, not comments; a comment marker inside a string is rare
        // enough in these snippets to ignore.
        Some(at) if !(comment == "#" && line.trim_start().starts_with("#[")) => &line[..at],
        _ => line,
    };
    let flat: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    // rustfmt's trailing commas in lists broken over lines.
    flat.replace(",)", ")").replace(",}", "}")
}

fn check_excerpt(doc: &str, at: usize, lang: &str, path: &str, body: &[String]) -> Vec<String> {
    let comment = if lang == "toml" { "#" } else { "//" };
    let source = match std::fs::read_to_string(root().join(path)) {
        Ok(s) => s,
        Err(e) => {
            return vec![format!(
                "{doc}:{at}: excerpt of {path}, which cannot be read: {e}"
            )]
        }
    };
    let flat: String = source
        .lines()
        .map(|l| normalized(l, comment))
        .collect::<Vec<_>>()
        .concat()
        .replace(",)", ")")
        .replace(",}", "}");
    let mut from = 0;
    let mut problems = Vec::new();
    for line in body {
        let n = normalized(line, comment);
        // A line that ends a list item: its comma may be gone in the source's last item.
        let n = n.trim_end_matches(',');
        if n.is_empty() || n == "..." || n == "/*...*/" {
            continue;
        }
        match flat[from..].find(n) {
            Some(k) => from += k + n.len(),
            None => problems.push(format!(
                "{doc}:{at}: `{}` is not in {path} (in order)",
                line.trim()
            )),
        }
    }
    problems
}

#[test]
fn every_snippet_is_doctested_or_an_excerpt_of_code_that_compiles() {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.push(root().join("README.md"));
    let mut problems = Vec::new();
    let mut excerpts = 0;
    for path in docs {
        let doc = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        for (at, info, before, body) in blocks(&text) {
            let lang = info.split(',').next().unwrap_or("");
            if lang != "rust" && lang != "toml" {
                continue;
            }
            let excerpt = before
                .strip_prefix("<!-- excerpt:")
                .and_then(|r| r.strip_suffix("-->"))
                .map(str::trim);
            match excerpt {
                Some(source) => {
                    excerpts += 1;
                    problems.extend(check_excerpt(&doc, at, lang, source, &body));
                }
                None if lang == "rust" && DOCTESTED.contains(&doc.as_str()) => {
                    if info.contains("ignore") {
                        problems.push(format!("{doc}:{at}: a doctest marked ignore"));
                    }
                }
                None => problems.push(format!(
                    "{doc}:{at}: a {lang} snippet that is neither doctested nor marked as an \
                     excerpt (`<!-- excerpt: PATH -->` on the line before it)"
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        excerpts >= 3,
        "the excerpts in docs/kernels.md and docs/design.md were found"
    );
}

#[test]
fn an_excerpt_that_left_its_source_is_caught() {
    let body = vec![
        "fn main() {".to_string(),
        "    not_in_the_build_script();".to_string(),
    ];
    let problems = check_excerpt("t.md", 1, "rust", "examples/custom-task/build.rs", &body);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("not_in_the_build_script"),
        "{}",
        problems[0]
    );
}
