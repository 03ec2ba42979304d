//! A Redis URL as it may be shown: in an error, a log line, a `repr`, a CLI message.

/// Query parameters whose values are never secrets, shown as they are.
const PLAIN: &[&str] = &["db", "protocol", "sharded_pubsub"];

/// Query parameters that name a user: shown unless the URL also carries a secret in its query
/// (then they pair with it, and a user name and its password together are a credential).
const USERS: &[&str] = &["sentinel_username", "user"];

/// `url` with every credential it carries replaced by `***`, for messages.
///
/// What is hidden, for every URL form (`redis://`, `rediss://`, `redis+unix://`, `unix://`,
/// `redis+sentinel://`, `redis+cluster://`, and a string that is no URL at all):
///
/// - the whole user info before the `@` (user and password: `redis://password@host` is how some
///   clients write a password alone, so a lone name is hidden too), also when an unencoded `/`,
///   `?` or `#` in the password would make a URL parser see it elsewhere;
/// - the value of every query parameter except the ones known to carry no secret (`db`,
///   `protocol`, `sharded_pubsub`): so `sentinel_password`, a Unix socket's `pass`, and a
///   misspelt `sentinel_pasword` alike; a parameter without `=` is hidden whole;
/// - `sentinel_username` and `user` when the query also carries a hidden value (they pair with a
///   password); alone, a user name is shown;
/// - a fragment other than `#insecure`.
///
/// Host names, ports, the path (database, master name, socket path) are kept, so the message
/// still says where.
///
/// # Examples
///
/// ```
/// use crosslock::redact_url;
/// assert_eq!(redact_url("redis://app:s3cret@10.0.0.1:6379/0"), "redis://***@10.0.0.1:6379/0");
/// assert_eq!(
///     redact_url("redis+sentinel://h:26379/orders?sentinel_username=ops&sentinel_password=pw"),
///     "redis+sentinel://h:26379/orders?sentinel_username=***&sentinel_password=***"
/// );
/// assert_eq!(redact_url("redis://h:6379/3"), "redis://h:6379/3");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    let tail = match userinfo_end(rest) {
        Some(at) => {
            out.push_str("***@");
            &rest[at + 1..]
        }
        None => rest,
    };
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (tail, None),
    };
    let (base, query) = match before_fragment.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before_fragment, None),
    };
    out.push_str(base);
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_query(query));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(if fragment.is_empty() || fragment == "insecure" {
            fragment
        } else {
            "***"
        });
    }
    out
}

/// Where the user info ends (its `@`) in `rest`, the URL after `scheme://`.
pub(crate) fn userinfo_end(rest: &str) -> Option<usize> {
    let query = rest.find(['?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..query].rfind('@') {
        return Some(at);
    }
    // An unencoded '?' or '#' in a password puts its '@' after it: an '@' with no '=' between
    // them is that, not an '@' in a parameter's value.
    let after = &rest[query..];
    let until = after.find('=').unwrap_or(after.len());
    after[..until].rfind('@').map(|at| query + at)
}

fn redact_query(query: &str) -> String {
    let pairs: Vec<&str> = query.split('&').collect();
    let secret = |pair: &str| match pair.split_once('=') {
        Some((key, _)) => !PLAIN.contains(&key) && !USERS.contains(&key),
        None => !pair.is_empty(),
    };
    let paired = pairs.iter().any(|p| secret(p));
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            _ if pair.is_empty() => String::new(),
            None => "***".to_owned(),
            Some((key, value)) => {
                let shown = PLAIN.contains(&key) || (USERS.contains(&key) && !paired);
                if shown {
                    format!("{key}={value}")
                } else {
                    format!("{key}=***")
                }
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn hides_every_credential_form() {
        for (url, shown) in [
            ("redis://u:secret@h:1/0", "redis://***@h:1/0"),
            ("redis://:secret@h:1/0", "redis://***@h:1/0"),
            ("redis://secret@h:1/0", "redis://***@h:1/0"),
            ("redis://u:p@ss@h:1/0", "redis://***@h:1/0"),
            ("redis://u:pa/ss@h:1/0", "redis://***@h:1/0"),
            ("redis://u:pa?ss@h:1/0", "redis://***@h:1/0"),
            ("redis://u:pa#ss@h:1/0", "redis://***@h:1/0"),
            ("redis://h:1/0", "redis://h:1/0"),
            ("rediss://h:1/0#insecure", "rediss://h:1/0#insecure"),
            ("redis://h:1/0?protocol=3", "redis://h:1/0?protocol=3"),
            ("redis://h:1/0?password=pw", "redis://h:1/0?password=***"),
            (
                "redis+unix:///tmp/r.sock?db=2&user=app&pass=pw",
                "redis+unix:///tmp/r.sock?db=2&user=***&pass=***",
            ),
            ("unix:///tmp/r.sock?user=app", "unix:///tmp/r.sock?user=app"),
            (
                "redis+sentinel://h/m?sentinel_password=a@b",
                "redis+sentinel://h/m?sentinel_password=***",
            ),
            (
                "redis+sentinel://u:p@h1,h2/m/1?sentinel_username=s&sentinel_password=pw",
                "redis+sentinel://***@h1,h2/m/1?sentinel_username=***&sentinel_password=***",
            ),
            (
                "redis+sentinel://h/m?sentinel_username=ops",
                "redis+sentinel://h/m?sentinel_username=ops",
            ),
            (
                "redis+sentinel://h/m?sentinel_pasword=pw",
                "redis+sentinel://h/m?sentinel_pasword=***",
            ),
            ("redis+sentinel://h/m?pw", "redis+sentinel://h/m?***"),
            (
                "redis+cluster://u:p@h1,h2?sharded_pubsub=on&x=pw",
                "redis+cluster://***@h1,h2?sharded_pubsub=on&x=***",
            ),
            ("u:secret@h:1", "***@h:1"),
            ("redis://h:1/0#pw", "redis://h:1/0#***"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
