//! Model-name globs: `*` matches any run of characters, `?` exactly one; ASCII
//! case-insensitive (`*a100*` matches `NVIDIA A100-SXM4-80GB`).

/// Whether `name` matches `pattern`. Iterative with one backtrack point: O(|pattern|·|name|)
/// worst case, no allocation.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi].eq_ignore_ascii_case(&n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether the model `pattern` names the GPU `name`: a glob ([`matches`]) when it has `*` or
/// `?`; otherwise the whole name, or one word of it, ASCII case-insensitive, where words are the
/// name's runs of letters and digits with the vendor prefix left in (`a100` names
/// `NVIDIA A100-SXM4-80GB`, `t4` names `NVIDIA T4`, `rtx4090` names nothing: use `*4090*`).
/// The bare-word form is how Akash SDLs name models (`vendor/nvidia/model/a100`).
pub(crate) fn matches_model(pattern: &str, name: &str) -> bool {
    if pattern.contains(['*', '?']) {
        return matches(pattern, name);
    }
    name.eq_ignore_ascii_case(pattern)
        || name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| !word.is_empty() && word.eq_ignore_ascii_case(pattern))
}

#[cfg(test)]
mod tests {
    use super::{matches, matches_model};

    #[test]
    fn bare_words_name_a_model_word() {
        assert!(matches_model("a100", "NVIDIA A100-SXM4-80GB"));
        assert!(matches_model("A100", "NVIDIA A100 80GB PCIe"));
        assert!(matches_model("t4", "NVIDIA T4"));
        assert!(matches_model("h100", "NVIDIA H100 80GB HBM3"));
        assert!(
            !matches_model("a10", "NVIDIA A100-SXM4-80GB"),
            "a word, not a prefix"
        );
        assert!(!matches_model("t4", "NVIDIA RTX A4000"));
        assert!(
            matches_model("*SXM4*", "NVIDIA A100-SXM4-80GB"),
            "globs stay globs"
        );
        assert!(matches_model("NVIDIA T4", "nvidia t4"), "the whole name");
    }

    #[test]
    fn star_question_and_case() {
        assert!(matches("*A100*", "NVIDIA A100-SXM4-80GB"));
        assert!(matches("*a100*", "NVIDIA A100-SXM4-80GB"));
        assert!(matches("NVIDIA H100*", "NVIDIA H100 80GB HBM3"));
        assert!(matches("gfx90?", "gfx90a"));
        assert!(matches("*", ""));
        assert!(!matches("*A100*", "NVIDIA H100 80GB HBM3"));
        assert!(!matches("A100", "NVIDIA A100"));
        assert!(!matches("?", ""));
        assert!(matches("*SXM*80*", "NVIDIA A100-SXM4-80GB"));
        assert!(!matches("*SXM*40*", "NVIDIA A100-SXM4-80GB"));
    }
}
