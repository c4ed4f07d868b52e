//! Reading `GET /metrics`: a strict parser of the Prometheus text format and a scrape helper.

use std::collections::BTreeMap;

/// One sample of the text exposition format.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Metric name (a histogram's `_bucket`, `_sum` or `_count` included).
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
}

/// Parses the Prometheus text format (0.0.4) strictly: every sample belongs to a family
/// declared by a `# TYPE` line before it, label values are quoted, values are numbers.
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line has a kind");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "unknown type in `{line}`"
            );
            types.insert(name.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment `{line}`");
        let name_end = line.find(['{', ' ']).expect("sample has a value");
        let name = &line[..name_end];
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in `{line}`"
        );
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(inner) => parse_labels(inner, line),
            None => (BTreeMap::new(), &line[name_end..]),
        };
        let value: f64 = rest
            .trim()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("bad value in `{line}`"));
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "`{name}` has no # TYPE line before it"
        );
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    samples
}

/// The labels of a sample (what follows its `{`) and the rest of the line after the `}`.
fn parse_labels<'a>(inner: &'a str, line: &str) -> (BTreeMap<String, String>, &'a str) {
    let mut labels = BTreeMap::new();
    let mut chars = inner.char_indices();
    let (mut key, mut value) = (String::new(), String::new());
    loop {
        let (i, c) = chars
            .next()
            .unwrap_or_else(|| panic!("unclosed labels in `{line}`"));
        match c {
            '}' if key.is_empty() => return (labels, &inner[i + 1..]),
            ',' if key.is_empty() => {}
            '=' => {
                assert_eq!(
                    chars.next().map(|(_, c)| c),
                    Some('"'),
                    "unquoted value in `{line}`"
                );
                loop {
                    match chars.next().map(|(_, c)| c) {
                        Some('"') => break,
                        Some('\\') => match chars.next().map(|(_, c)| c) {
                            Some('n') => value.push('\n'),
                            Some(e) => value.push(e),
                            None => panic!("dangling escape in `{line}`"),
                        },
                        Some(c) => value.push(c),
                        None => panic!("unclosed value in `{line}`"),
                    }
                }
                labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
            }
            c if c.is_ascii_alphanumeric() || c == '_' => key.push(c),
            _ => panic!("bad label name in `{line}`"),
        }
    }
}

/// The value of the one sample named `name` whose labels include `labels`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].value
}

/// Scrapes `base/metrics` with `token` (none: anonymous); the status and the body.
pub async fn scrape(base: &str, token: Option<&str>) -> (u16, Option<String>, String) {
    let mut req = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.expect("GET /metrics");
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    (status, ctype, resp.text().await.unwrap())
}
