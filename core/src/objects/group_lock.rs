//! [`GroupLock`]: Redisson's `getMultiLock(group, values)` (`RedissonFasterMultiLock`).
//!
//! One hash per group; each value is a field named by a hash of the value as the Java codec
//! encodes it ([`field_of`]). A hold is a set of values, recorded under the group and the
//! values' fields (`group#field,field…`), so one owner may hold several sets of one group.

use std::sync::Arc;

use crate::client::Client;
use crate::engine::family::{Family, Info, LockCore};
use crate::engine::holds::RenewKind;
use crate::engine::{Attempt, Protocol, Request, Waiting, epoch_ms};
use crate::error::{Error, Result};
use crate::kinds::LockKind;
use crate::scripts;
use crate::session::Ctx;

use super::{
    Release, check_name, give_back_by_release, lock_type, ms, parse_info, settled, woken_on,
    won_or_busy,
};
use crate::layout;

/// How a group lock's values are encoded before they are hashed into field names: it must be the
/// codec of the Redisson client that shares the group (`Config.setCodec`, default `Kryo5Codec`).
///
/// # Examples
///
/// ```no_run
/// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
/// use crosslock::GroupCodec;
/// // A Java service configured with `config.setCodec(StringCodec.INSTANCE)`:
/// let lock = client.group_lock_with("orders", ["42", "43"], GroupCodec::String)?;
/// let guard = lock.acquire().await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GroupCodec {
    /// Redisson's default `Kryo5Codec`, a value being a `java.lang.String`.
    #[default]
    Kryo5,
    /// Redisson's `StringCodec`: the value's UTF-8 bytes.
    String,
}

impl GroupCodec {
    /// The codec named `name`: `"kryo5"` (Redisson's `Kryo5Codec`) or `"string"` (`StringCodec`),
    /// as the bindings take it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for any other name.
    ///
    /// # Examples
    ///
    /// ```
    /// use crosslock::GroupCodec;
    /// assert_eq!(GroupCodec::from_name("string").unwrap(), GroupCodec::String);
    /// assert!(GroupCodec::from_name("json").is_err());
    /// ```
    pub fn from_name(name: &str) -> Result<GroupCodec> {
        match name {
            "kryo5" => Ok(GroupCodec::Kryo5),
            "string" => Ok(GroupCodec::String),
            _ => Err(Error::invalid(format!(
                "a group lock's codec is \"kryo5\" (Redisson's default Kryo5Codec) or \"string\" \
                 (StringCodec), the codec the Java side is configured with; got {name:?}"
            ))),
        }
    }

    /// The bytes the Java codec writes for the string `value`.
    fn encode(self, value: &str) -> Vec<u8> {
        match self {
            GroupCodec::String => value.as_bytes().to_vec(),
            GroupCodec::Kryo5 => kryo5_string(value),
        }
    }
}

/// Kryo 5's bytes for a `java.lang.String` written as a class and object (`writeClassAndObject`):
/// the class id of `String` (`0x03`), then `Output.writeString`: 2 to 32 ASCII characters as
/// themselves with the last byte's top bit set; otherwise the UTF-16 length + 1 as a varint whose
/// first byte has the top bit set (`0x81` alone for ""), then each UTF-16 unit as 1 to 3 bytes
/// (UTF-8 for one unit; a surrogate pair becomes two 3-byte sequences). Checked byte for byte
/// against Redisson 4.7.0's `Kryo5Codec` (tests-java, `groupField`).
fn kryo5_string(value: &str) -> Vec<u8> {
    let units: Vec<u16> = value.encode_utf16().collect();
    let mut out = Vec::with_capacity(value.len() + 6);
    out.push(0x03);
    if units.len() > 1 && units.len() <= 32 && value.is_ascii() {
        out.extend_from_slice(value.as_bytes());
        if let Some(last) = out.last_mut() {
            *last |= 0x80;
        }
        return out;
    }
    let mut length = units.len() as u64 + 1;
    let first = (length & 0x3f) as u8 | 0x80;
    length >>= 6;
    if length == 0 {
        out.push(first);
    } else {
        out.push(first | 0x40);
        while length >= 0x80 {
            out.push((length & 0x7f) as u8 | 0x80);
            length >>= 7;
        }
        out.push(length as u8);
    }
    for unit in units {
        if unit <= 0x7f {
            out.push(unit as u8);
        } else if unit <= 0x7ff {
            out.push(0xc0 | (unit >> 6) as u8);
            out.push(0x80 | (unit & 0x3f) as u8);
        } else {
            out.push(0xe0 | (unit >> 12) as u8);
            out.push(0x80 | ((unit >> 6) & 0x3f) as u8);
            out.push(0x80 | (unit & 0x3f) as u8);
        }
    }
    out
}

/// Redisson's fixed HighwayHash key for field names (`org.redisson.misc.Hash`).
const FIELD_KEY: [u64; 4] = [
    0x9e37_79b9_7f4a_7c15,
    0xf39c_c060_5ced_c834,
    0x1082_276b_f3a2_7251,
    0xf86c_6a11_d0c1_8e95,
];

/// The hash field Redisson names `value` by: HighwayHash-128 of its encoding, the two 64-bit
/// halves big-endian, Base64 without the trailing `==` (22 characters).
///
/// # Examples
///
/// ```
/// use crosslock::GroupCodec;
/// assert_eq!(crosslock::group_field("a", GroupCodec::Kryo5), "Jon6GCcO+0QSJkhre5wXYA");
/// assert_eq!(crosslock::group_field("a", GroupCodec::String), "qwvAS12pR0CgRitaypEjUw");
/// ```
pub fn group_field(value: &str, codec: GroupCodec) -> String {
    field_of(&codec.encode(value))
}

fn field_of(bytes: &[u8]) -> String {
    use highway::{HighwayHash, HighwayHasher, Key};
    let [a, b] = HighwayHasher::new(Key(FIELD_KEY)).hash128(bytes);
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&a.to_be_bytes());
    raw[8..].copy_from_slice(&b.to_be_bytes());
    base64_unpadded(&raw)
}

/// Standard Base64 (`+`, `/`) without padding.
fn base64_unpadded(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 0x3f]));
        }
    }
    out
}

/// The separator between the group and the fields in a hold's name (Base64 has no `#`, so the
/// last one is it).
const HOLD_SEPARATOR: char = '#';

/// The group lock protocol: a set of fields in the group's hash, `0` on
/// `redisson_lock__channel:{group}` at release.
#[derive(Debug)]
pub(crate) struct FasterMultiLock {
    /// `group#field,field…`: what its holds are recorded under.
    hold_name: Arc<str>,
    group: Arc<str>,
    fields: Vec<String>,
    channel: String,
}

impl FasterMultiLock {
    fn new(group: Arc<str>, mut fields: Vec<String>) -> Self {
        fields.sort_unstable();
        let hold_name = format!("{group}{HOLD_SEPARATOR}{}", fields.join(","));
        FasterMultiLock {
            hold_name: Arc::from(hold_name),
            channel: layout::lock_channel(&group),
            group,
            fields,
        }
    }

    fn field_args<'a>(
        &'a self,
        head: &[&'a dyn crate::transport::ToArg],
    ) -> Vec<&'a dyn crate::transport::ToArg> {
        let mut args: Vec<&dyn crate::transport::ToArg> = head.to_vec();
        args.extend(
            self.fields
                .iter()
                .map(|f| f as &dyn crate::transport::ToArg),
        );
        args
    }
}

impl Protocol for FasterMultiLock {
    type Won = ();

    fn name(&self) -> &Arc<str> {
        &self.hold_name
    }

    fn waiting(&self, _holder: &str) -> Waiting {
        woken_on(&self.channel)
    }

    async fn attempt(self: Arc<Self>, cx: Arc<Ctx>, request: Request) -> Result<Attempt<()>> {
        let lease = ms(request.lease);
        let now = epoch_ms();
        let holder = &*request.holder;
        let head: [&dyn crate::transport::ToArg; 3] = [&lease, &now, &holder];
        let reply: Option<i64> = cx
            .conn
            .eval_synced(
                &request.acks,
                &scripts::GROUP_ACQUIRE,
                &[&self.group],
                &self.field_args(&head),
                Some(&*self.group),
            )
            .await?;
        Ok(won_or_busy(reply))
    }

    async fn settle(&self, cx: &Ctx, holder: &str, recorded: usize) -> Result<Option<()>> {
        Ok(settled(&self.info(cx, holder).await?, recorded))
    }

    give_back_by_release!();
}

impl Family for FasterMultiLock {
    const KIND: LockKind = LockKind::GroupLock;

    fn for_name(name: Arc<str>) -> Self {
        let (group, fields) = name.rsplit_once(HOLD_SEPARATOR).unwrap_or((&name, ""));
        let fields = fields
            .split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
            .collect();
        FasterMultiLock::new(Arc::from(group), fields)
    }

    fn shown_name(&self) -> &str {
        &self.group
    }

    fn renew_kind(name: &Arc<str>) -> RenewKind {
        let (group, fields) = name.rsplit_once(HOLD_SEPARATOR).unwrap_or((name, ""));
        RenewKind::Group {
            key: Arc::from(group),
            fields: Arc::from(fields),
        }
    }

    /// Runs the group release script.
    async fn release(&self, cx: &Ctx, holder: &str, release: Release) -> Result<Option<bool>> {
        let (lease_after, retry, which) = release.args();
        let lease = lease_after.max(1);
        let now = epoch_ms();
        let publish = cx.conn.publish_command();
        let head: [&dyn crate::transport::ToArg; 6] =
            [&holder, &lease, &publish, &now, &which, &retry];
        let reply: Option<i64> = cx
            .conn
            .eval(
                &scripts::GROUP_RELEASE,
                &[&self.group, &self.channel],
                &self.field_args(&head),
                Some(&*self.group),
            )
            .await?;
        Ok(reply.map(|r| r == 1))
    }

    async fn force_unlock(&self, cx: &Ctx) -> Result<bool> {
        let publish = cx.conn.publish_command();
        let now = epoch_ms();
        let head: [&dyn crate::transport::ToArg; 2] = [&publish, &now];
        let freed: i64 = cx
            .conn
            .eval(
                &scripts::GROUP_FORCE_UNLOCK,
                &[&self.group, &self.channel],
                &self.field_args(&head),
                Some(&*self.group),
            )
            .await?;
        Ok(freed == 1)
    }

    async fn info(&self, cx: &Ctx, holder: &str) -> Result<Info> {
        let now = epoch_ms();
        let head: [&dyn crate::transport::ToArg; 2] = [&holder, &now];
        let reply: Vec<redis::Value> = cx
            .conn
            .eval(
                &scripts::GROUP_INFO,
                &[&self.group],
                &self.field_args(&head),
                Some(&*self.group),
            )
            .await?;
        Ok(parse_info(&reply))
    }

    fn token(_won: &()) -> Option<u64> {
        None
    }
}

lock_type! {
    /// Many values of one group locked at once, all or none, stored exactly as Redisson's
    /// `getMultiLock(group, values)` (`RedissonFasterMultiLock`, Redisson 3.38 and later).
    ///
    /// Redis holds one hash at the group's name; each value is a field named by
    /// [`group_field`] (a hash of the value as the Java codec encodes it), holding the holder
    /// `<client-uuid>:<n>`, beside `<field>:<holder>:expire_time` (epoch ms, from the client's
    /// clock as Redisson's) and `<field>:<holder>:lock_count` (re-entry count). A holder of
    /// any of the values excludes every other holder of a set that shares one; disjoint sets of
    /// one group do not exclude each other. Releases publish `0` on
    /// `redisson_lock__channel:{group}`, waking waiters of any language.
    ///
    /// A Java service must use the same codec ([`GroupCodec`], Redisson's default `Kryo5Codec`
    /// unless it configured another) and pass the values as `String`s.
    ///
    /// Without a lease the watchdog keeps it (30 s renewed every 10 s); with a lease its fields
    /// expire after it. [`name`](GroupLock::name) is the group.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// // Redisson: redisson.getMultiLock("orders", List.of("42", "43"))
    /// let lock = client.group_lock("orders", ["42", "43"])?;
    /// let guard = lock.acquire().await?;
    /// // ... orders 42 and 43 are ours; order 44 is free for others ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub struct GroupLock(FasterMultiLock) -> ();
    what = "group lock";
}

impl GroupLock {
    /// The channel its releases are published on: `redisson_lock__channel:{group}`.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.group_lock("orders", ["42"])?;
    /// assert_eq!(lock.channel(), "redisson_lock__channel:{orders}");
    /// # Ok(()) }
    /// ```
    pub fn channel(&self) -> &str {
        &self.core.proto.channel
    }

    /// The hash fields of its values, sorted (see [`group_field`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.group_lock("orders", ["a"])?;
    /// assert_eq!(lock.fields(), ["Jon6GCcO+0QSJkhre5wXYA"]);
    /// # Ok(()) }
    /// ```
    pub fn fields(&self) -> &[String] {
        &self.core.proto.fields
    }
}

impl Client {
    /// A [`GroupLock`] on `values` of `group`, with Redisson's default codec (`Kryo5Codec`):
    /// Redisson's `getMultiLock(group, values)`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty group name,
    /// no values, or a value given twice.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let guard = client.group_lock("orders", ["42", "43"])?.acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn group_lock<I, V>(&self, group: &str, values: I) -> Result<GroupLock>
    where
        I: IntoIterator<Item = V>,
        V: AsRef<str>,
    {
        self.group_lock_with(group, values, GroupCodec::Kryo5)
    }

    /// A [`GroupLock`] whose values are encoded with `codec` (the Java side's codec).
    ///
    /// # Errors
    ///
    /// As [`group_lock`](Client::group_lock).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// use crosslock::GroupCodec;
    /// let lock = client.group_lock_with("orders", ["42"], GroupCodec::String)?;
    /// let guard = lock.acquire().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn group_lock_with<I, V>(
        &self,
        group: &str,
        values: I,
        codec: GroupCodec,
    ) -> Result<GroupLock>
    where
        I: IntoIterator<Item = V>,
        V: AsRef<str>,
    {
        let group = check_name(self, group, "group lock")?;
        let mut seen = std::collections::HashSet::new();
        let mut fields = Vec::new();
        for value in values {
            let value = value.as_ref();
            if !seen.insert(value.to_owned()) {
                return Err(Error::invalid(format!(
                    "group lock '{group}': the value {value:?} is given twice; give each value once"
                ))
                .with_lock(&group));
            }
            fields.push(group_field(value, codec));
        }
        if fields.is_empty() {
            return Err(Error::invalid(format!(
                "group lock '{group}' needs at least one value to lock, got none"
            ))
            .with_lock(&group));
        }
        Ok(GroupLock {
            core: LockCore::new(self.clone(), FasterMultiLock::new(group, fields)),
        })
    }
}

impl Client {
    /// A [`GroupLock`] on the hash fields `fields` of `group` (as [`group_field`] names values):
    /// for code that has the fields rather than the values (the Node binding, which keeps a lock
    /// as its group and fields).
    ///
    /// # Errors
    ///
    /// As [`group_lock`](Client::group_lock), and for a field that is not 22 Base64 characters.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
    /// let lock = client.group_lock_by_fields("orders", ["Jon6GCcO+0QSJkhre5wXYA"])?;
    /// assert_eq!(lock.fields(), client.group_lock("orders", ["a"])?.fields());
    /// # Ok(()) }
    /// ```
    pub fn group_lock_by_fields<I, V>(&self, group: &str, fields: I) -> Result<GroupLock>
    where
        I: IntoIterator<Item = V>,
        V: AsRef<str>,
    {
        let group = check_name(self, group, "group lock")?;
        let mut listed: Vec<String> = Vec::new();
        for field in fields {
            let field = field.as_ref();
            let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
            if field.len() != 22 || !field.chars().all(base64) {
                return Err(Error::invalid(format!(
                    "group lock '{group}': {field:?} is not a value's field (22 Base64 \
                     characters, as crosslock::group_field makes them)"
                ))
                .with_lock(&group));
            }
            if listed.iter().any(|f| f == field) {
                return Err(Error::invalid(format!(
                    "group lock '{group}': the field {field:?} is given twice; give each once"
                ))
                .with_lock(&group));
            }
            listed.push(field.to_owned());
        }
        if listed.is_empty() {
            return Err(Error::invalid(format!(
                "group lock '{group}' needs at least one value to lock, got none"
            ))
            .with_lock(&group));
        }
        Ok(GroupLock {
            core: LockCore::new(self.clone(), FasterMultiLock::new(group, listed)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes and fields Redisson 4.7.0 wrote for these values (`Kryo5Codec` and `StringCodec`
    /// value encoders, `Hash.hash128toBase64`), from the tests-java driver's `groupField`.
    const REDISSON: &[(&str, &str, &str, &str)] = &[
        (
            "",
            "0381",
            "8kZ0F42HzoQfW3jDxQ6f4g",
            "t6rZwibGo2uy1OSmNVe8pg",
        ),
        (
            "a",
            "038261",
            "Jon6GCcO+0QSJkhre5wXYA",
            "qwvAS12pR0CgRitaypEjUw",
        ),
        (
            "abc",
            "036162e3",
            "FY3OcS+uaYbOl/mDs7Pp4A",
            "BhA5LsZVetaLy1jDRVlHJg",
        ),
        (
            "héllo",
            "038668c3a96c6c6f",
            "HQvB+8Qy7DfRFKzQpsKmrA",
            "C21sdzlNA76/qU3dH4L30Q",
        ),
        (
            "日本語",
            "0384e697a5e69cace8aa9e",
            "vUBKyryx/0Di4fMPuWRWMA",
            "4PLJx8KOCYUcHV8bTDfq4g",
        ),
        (
            "😀",
            "0383eda0bdedb880",
            "x8RNEAwQ8KZSMhraJs6dXA",
            "BFYDo74PGvb6OkPcvcLRhw",
        ),
    ];

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn values_hash_to_redissons_fields() {
        for &(value, kryo, kryo_field, string_field) in REDISSON {
            assert_eq!(hex(&kryo5_string(value)), kryo, "{value:?}");
            assert_eq!(
                group_field(value, GroupCodec::Kryo5),
                kryo_field,
                "{value:?}"
            );
            assert_eq!(
                group_field(value, GroupCodec::String),
                string_field,
                "{value:?}"
            );
        }
    }

    #[test]
    fn kryo_switches_from_ascii_to_counted_strings_past_32_characters() {
        // Redisson: 32 'y' are 0x03, 31 × 0x79, 0xf9; 33 'y' are 0x03, 0xa2, 33 × 0x79.
        let at = kryo5_string(&"y".repeat(32));
        assert_eq!((at.len(), at[1], at[32]), (33, 0x79, 0xf9));
        let past = kryo5_string(&"y".repeat(33));
        assert_eq!((past.len(), past[1], past[34]), (35, 0xa2, 0x79));
        // 200 'x': length 201 as a two-byte varint.
        assert_eq!(&kryo5_string(&"x".repeat(200))[..3], &[0x03, 0xc9, 0x03]);
    }

    #[test]
    fn a_hold_name_gives_back_its_group_and_fields() {
        let lock = FasterMultiLock::new(Arc::from("a#b"), vec!["y".into(), "x".into()]);
        assert_eq!(&*lock.hold_name, "a#b#x,y");
        let back = FasterMultiLock::for_name(lock.hold_name.clone());
        assert_eq!(
            (&*back.group, back.fields.clone()),
            ("a#b", vec!["x".to_owned(), "y".to_owned()])
        );
        assert_eq!(
            FasterMultiLock::renew_kind(&lock.hold_name),
            RenewKind::Group {
                key: Arc::from("a#b"),
                fields: Arc::from("x,y")
            }
        );
    }
}
