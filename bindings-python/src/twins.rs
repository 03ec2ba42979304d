//! `py_twins!`: a native method and its `_async` twin, written once.
//!
//! Every I/O method of a native class has two faces. The sync one blocks the calling thread with
//! the GIL released and Ctrl-C honoured ([`runtime::wait`](crate::runtime::wait)); the async one
//! answers an awaitable ([`runtime::awaitable`](crate::runtime::awaitable)). Both run the same
//! future, so the macro takes one body and one docstring and writes both methods; the twin's
//! docstring is "As `x`, as an awaitable." (the Python layer documents the public method).
//!
//! ```text
//! py_twins! {
//!     impl PyThing {
//!         // the class's other #[pymethods] items, as written by hand
//!     }
//!     twins {
//!         /// Docstring of the sync face.
//!         fn x | x_async (&self, py, arg: u32) -> T {
//!             // statements (`?` returns a `PyErr` from the method), then the future of a
//!             // `crosslock::Result<T>`; a signal while it waits lets it finish in the background
//!         }
//!         /// A wait the sync face cancels on a signal: `token` is `Some(CancellationToken)`
//!         /// there (pass it to `twins::cancel_by`), `None` on the async face, which is
//!         /// cancelled by dropping it.
//!         cancel(token) fn y | y_async (&self, py, wait: Option<f64>) -> T {
//!             // … `(future, undo)`: `undo(won)` gives back what a cancelled wait still won
//!         }
//!         /// As `cancel`, and the async face answers a `PendingHold` of `Won::Variant(won)`,
//!         /// given back by `undo(won)` unless claimed.
//!         cancel(token) hold(Won::Variant) fn z | z_async (&self, py, …) -> T { … }
//!     }
//! }
//! ```
//!
//! The twin's name is spelled out (no `paste` dependency) and checked at compile time to be the
//! sync name plus `_async`. A type that uses the macro implements [`Named`]: the lock name its
//! errors carry.

use crosslock::{AcquireOptions, CancellationToken};

/// The name errors of a native object's twins carry (`to_py_err`'s `lock_name`).
pub(crate) trait Named {
    fn lock_name(&self) -> Option<&str>;
}

/// `options` cancelled by `token` when there is one (the sync face of a `cancel` twin).
pub(crate) fn cancel_by(
    options: AcquireOptions,
    token: Option<CancellationToken>,
) -> AcquireOptions {
    match token {
        Some(token) => options.cancel(token),
        None => options,
    }
}

/// Whether `twin` is `name` followed by `_async` (a compile-time check of every pair).
pub(crate) const fn is_twin(name: &str, twin: &str) -> bool {
    const SUFFIX: &[u8] = b"_async";
    let (name, twin) = (name.as_bytes(), twin.as_bytes());
    if twin.len() != name.len() + SUFFIX.len() {
        return false;
    }
    let mut i = 0;
    while i < twin.len() {
        let expected = if i < name.len() {
            name[i]
        } else {
            SUFFIX[i - name.len()]
        };
        if twin[i] != expected {
            return false;
        }
        i += 1;
    }
    true
}

macro_rules! py_twins {
    (
        impl $ty:ident { $($plain:tt)* }
        twins { $($twins:tt)* }
    ) => {
        $crate::twins::py_twins!(@munch $ty [$($plain)*] $($twins)*);
    };

    (@munch $ty:ident [$($done:tt)*]) => {
        #[::pyo3::pymethods]
        impl $ty {
            $($done)*
        }
    };

    // A twin whose sync face lets the operation finish in the background on a signal.
    (@munch $ty:ident [$($done:tt)*]
        $(#[doc = $doc:literal])*
        $(#[pyo3($($opt:tt)*)])?
        fn $name:ident | $twin:ident
            (&$self:ident, $py:ident $(, $arg:ident : $arg_ty:ty)* $(,)?) -> $ret:ty
            $body:block
        $($rest:tt)*
    ) => {
        $crate::twins::py_twins!(@munch $ty [
            $($done)*

            $(#[doc = $doc])*
            $(#[pyo3($($opt)*)])?
            fn $name(&$self, $py: ::pyo3::Python<'_> $(, $arg: $arg_ty)*) -> ::pyo3::PyResult<$ret> {
                const _: () = assert!($crate::twins::is_twin(stringify!($name), stringify!($twin)));
                let future = $body;
                $crate::runtime::wait(
                    $py,
                    future,
                    $crate::runtime::OnSignal::Detach,
                    $crate::twins::Named::lock_name($self),
                )
            }

            #[doc = concat!("As `", stringify!($name), "`, as an awaitable.")]
            $(#[pyo3($($opt)*)])?
            fn $twin<'py>(
                &$self,
                $py: ::pyo3::Python<'py>
                $(, $arg: $arg_ty)*
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let future = $body;
                $crate::runtime::awaitable($py, future, $crate::twins::Named::lock_name($self))
            }
        ] $($rest)*);
    };

    // A twin whose sync face cancels the wait on a signal and undoes a win that raced it; its
    // async face answers what the future answers.
    (@munch $ty:ident [$($done:tt)*]
        $(#[doc = $doc:literal])*
        $(#[pyo3($($opt:tt)*)])?
        cancel($token:ident) fn $name:ident | $twin:ident
            (&$self:ident, $py:ident $(, $arg:ident : $arg_ty:ty)* $(,)?) -> $ret:ty
            $body:block
        $($rest:tt)*
    ) => {
        $crate::twins::py_twins!(@munch $ty [
            $($done)*
            $(#[doc = $doc])*
            $(#[pyo3($($opt)*)])?
            fn $name(&$self, $py: ::pyo3::Python<'_> $(, $arg: $arg_ty)*) -> ::pyo3::PyResult<$ret> {
                const _: () = assert!($crate::twins::is_twin(stringify!($name), stringify!($twin)));
                $crate::twins::py_twins!(@cancel_wait $self $py $token $ret $body)
            }

            #[doc = concat!("As `", stringify!($name), "`, as an awaitable.")]
            $(#[pyo3($($opt)*)])?
            fn $twin<'py>(
                &$self,
                $py: ::pyo3::Python<'py>
                $(, $arg: $arg_ty)*
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let $token: ::std::option::Option<::crosslock::CancellationToken> = None;
                let (future, _undo) = $body;
                $crate::runtime::awaitable($py, future, $crate::twins::Named::lock_name($self))
            }
        ] $($rest)*);
    };

    // As `cancel`, and the async face answers a `PendingHold` of the win, undone unless claimed.
    (@munch $ty:ident [$($done:tt)*]
        $(#[doc = $doc:literal])*
        $(#[pyo3($($opt:tt)*)])?
        cancel($token:ident) hold($won:path) fn $name:ident | $twin:ident
            (&$self:ident, $py:ident $(, $arg:ident : $arg_ty:ty)* $(,)?) -> $ret:ty
            $body:block
        $($rest:tt)*
    ) => {
        $crate::twins::py_twins!(@munch $ty [
            $($done)*
            $(#[doc = $doc])*
            $(#[pyo3($($opt)*)])?
            fn $name(&$self, $py: ::pyo3::Python<'_> $(, $arg: $arg_ty)*) -> ::pyo3::PyResult<$ret> {
                const _: () = assert!($crate::twins::is_twin(stringify!($name), stringify!($twin)));
                $crate::twins::py_twins!(@cancel_wait $self $py $token $ret $body)
            }

            #[doc = concat!(
                "As `", stringify!($name), "`, as an awaitable of a `PendingHold`: the caller must ",
                "`claim()` it to keep what was won; dropped unclaimed (the awaiting task was ",
                "cancelled just as the acquire completed), it is given back. Cancelling it while it ",
                "waits leaves nothing behind (core's cancel-safety)."
            )]
            $(#[pyo3($($opt)*)])?
            fn $twin<'py>(
                &$self,
                $py: ::pyo3::Python<'py>
                $(, $arg: $arg_ty)*
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let $token: ::std::option::Option<::crosslock::CancellationToken> = None;
                let (future, undo) = $body;
                let future = async move {
                    // No await between the win and the pending hold: from here on, a win that
                    // never reaches the caller is given back.
                    let won: $ret = future.await?;
                    Ok($crate::lock::PyPendingHold::holding($won(won.clone()), undo(won)))
                };
                $crate::runtime::awaitable($py, future, $crate::twins::Named::lock_name($self))
            }
        ] $($rest)*);
    };

    // The sync face of a `cancel` twin (in the method's body: `#[pymethods]` sees no macro).
    (@cancel_wait $self:ident $py:ident $token:ident $ret:ty $body:block) => {{
        let cancel = ::crosslock::CancellationToken::new();
        let $token = Some(cancel.clone());
        let (future, undo) = $body;
        let undo: $crate::runtime::Undo<$ret> = Box::new(move |won| Box::pin(undo(won)));
        $crate::runtime::wait(
            $py,
            future,
            $crate::runtime::OnSignal::Cancel { token: cancel, undo },
            $crate::twins::Named::lock_name($self),
        )
    }};
}

pub(crate) use py_twins;
