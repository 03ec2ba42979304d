//! The lock kinds: one table, [`lock_kinds!`](crate::lock_kinds), from which [`LockKind`] and
//! every spelling of a kind is made: its number (what the Node binding's `lock*` methods take,
//! exported to TypeScript as the native `LockKind` enum), its name (`"fair_lock"`, what messages,
//! lost-lock events and both bindings say), its phrase in a message (`"fair lock"`,
//! `"the read lock of"`) and its type name (`FairLock`, the variant's own name, what `Debug`
//! shows).
//!
//! A new kind of the lock family is one line here, its `objects/<stem>.rs` and one subclass per
//! host; the Node binding's enum, the Python binding's `_native.KINDS` and
//! [`ffi::lock_of`](crate::ffi::lock_of) follow the table (the last is a `match`, so the compiler
//! points at it).

/// The table of lock kinds, handed to the macro named `$then`, one row per kind:
/// `Variant = number, "name", "phrase";` (after its doc comment). Core makes [`LockKind`] from
/// it; the Node binding makes its numeric `LockKind` enum from it (so TypeScript's numbers are
/// core's). Not part of the Rust API.
#[doc(hidden)]
#[macro_export]
macro_rules! lock_kinds {
    ($then:ident) => {
        $then! {
            /// [`Lock`](crate::Lock) (Redisson `RLock`).
            Lock = 0, "lock", "lock";
            /// [`FairLock`](crate::FairLock) (Redisson `RFairLock`).
            FairLock = 1, "fair_lock", "fair lock";
            /// [`SpinLock`](crate::SpinLock) (Redisson `RSpinLock`).
            SpinLock = 2, "spin_lock", "spin lock";
            /// [`FencedLock`](crate::FencedLock) (Redisson `RFencedLock`).
            FencedLock = 3, "fenced_lock", "fenced lock";
            /// [`NonReentrantLock`](crate::NonReentrantLock) (Redisson's non-reentrant lock).
            NonReentrantLock = 4, "non_reentrant_lock", "non-reentrant lock";
            /// [`NonReentrantFairLock`](crate::NonReentrantFairLock) (Redisson's non-reentrant
            /// fair lock).
            NonReentrantFairLock = 7, "non_reentrant_fair_lock", "non-reentrant fair lock";
            /// The read lock of a [`ReadWriteLock`](crate::ReadWriteLock).
            ReadLock = 5, "read_lock", "the read lock of";
            /// The write lock of a [`ReadWriteLock`](crate::ReadWriteLock).
            WriteLock = 6, "write_lock", "the write lock of";
            /// A permit of a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore) (the
            /// holder is the permit id).
            Permit = 9, "permit", "a permit of";
            /// [`GroupLock`](crate::GroupLock) (Redisson's `getMultiLock(group, values)`).
            GroupLock = 8, "group_lock", "group lock";
        }
    };
}

macro_rules! define_lock_kind {
    ($($(#[$doc:meta])* $kind:ident = $code:literal, $name:literal, $phrase:literal;)*) => {
        /// Which kind of lock a hold (or a lost-lock event) is about.
        ///
        /// # Examples
        ///
        /// ```no_run
        /// # async fn example(client: &crosslock::Client) -> crosslock::Result<()> {
        /// client.on_lock_lost(|lost| {
        ///     if lost.kind == crosslock::LockKind::FairLock {
        ///         eprintln!("fair lock {} lost", lost.name);
        ///     }
        /// });
        /// # Ok(()) }
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum LockKind {
            $($(#[$doc])* $kind = $code,)*
        }

        impl LockKind {
            /// Every kind, in the table's order.
            ///
            /// # Examples
            ///
            /// ```
            /// use crosslock::LockKind;
            /// assert!(LockKind::ALL.contains(&LockKind::FairLock));
            /// ```
            pub const ALL: &'static [LockKind] = &[$(LockKind::$kind,)*];

            /// The name used in messages and by the bindings (`"lock"`, `"fair_lock"`, …).
            ///
            /// # Examples
            ///
            /// ```
            /// assert_eq!(crosslock::LockKind::FairLock.as_str(), "fair_lock");
            /// ```
            pub fn as_str(self) -> &'static str {
                match self {
                    $(LockKind::$kind => $name,)*
                }
            }

            /// How a message names a lock of this kind before its name: `"fair lock"`,
            /// `"the read lock of"` (`… 'orders'`).
            pub(crate) fn phrase(self) -> &'static str {
                match self {
                    $(LockKind::$kind => $phrase,)*
                }
            }

            /// The Rust type's name (`"FairLock"`), what `Debug` shows.
            pub(crate) fn type_name(self) -> &'static str {
                match self {
                    $(LockKind::$kind => stringify!($kind),)*
                }
            }

            /// The kind's number, stable within a release: what the Node binding's `lock*`
            /// methods take.
            ///
            /// # Examples
            ///
            /// ```
            /// use crosslock::LockKind;
            /// assert_eq!(LockKind::from_code(LockKind::SpinLock.code()), Some(LockKind::SpinLock));
            /// ```
            pub fn code(self) -> u32 {
                self as u32
            }

            /// The kind numbered `code`, if any.
            ///
            /// # Examples
            ///
            /// ```
            /// assert_eq!(crosslock::LockKind::from_code(1000), None);
            /// ```
            pub fn from_code(code: u32) -> Option<LockKind> {
                match code {
                    $($code => Some(LockKind::$kind),)*
                    _ => None,
                }
            }
        }
    };
}

crate::lock_kinds!(define_lock_kind);

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::LockKind;

    #[test]
    fn names_and_codes_are_unique_and_round_trip() {
        let mut names = std::collections::HashSet::new();
        let mut codes = std::collections::HashSet::new();
        for &kind in LockKind::ALL {
            assert!(names.insert(kind.as_str()), "{kind} named twice");
            assert!(codes.insert(kind.code()), "{kind} numbered twice");
            assert_eq!(LockKind::from_code(kind.code()), Some(kind));
            // The name is the type name in snake case.
            let mut snake = String::new();
            for (i, c) in kind.type_name().chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            assert_eq!(snake, kind.as_str());
        }
    }
}
